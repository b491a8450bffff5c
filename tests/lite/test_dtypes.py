"""bfloat16, float16, float8 and sub-byte tensors: through the format, the session API and the float32 compute
path of narrow floats. onnxruntime is the oracle (on the float32 twin of a model where it has no bfloat16
kernels)."""
from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from tests.util import REPO, run_lite, run_ort, session_for

rng = np.random.default_rng(0)


def _float16_cnn() -> onnx.ModelProto:
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax, float16 input, weights and output."""
    def f16(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float16), name)

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1),
             helper.make_node("Softmax", ["y"], ["p"], axis=1)]
    graph = helper.make_graph(nodes, "fp16", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("p", TensorProto.FLOAT16, [2, 5])],
                              [f16("w", 4, 3, 3, 3), f16("b", 4), f16("fw", 5, 4), f16("fb", 5)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _activation_model(activation_type: int) -> onnx.ModelProto:
    """float32 in and out; inside, activations of `activation_type`: x*x + x -> Relu -> MatMul -> Sigmoid."""
    weight = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)
    weight = weight.astype(ml_dtypes.bfloat16).astype(np.float32)     # the same weight in both models
    if activation_type == TensorProto.BFLOAT16:
        weight = weight.astype(ml_dtypes.bfloat16)
    nodes = [helper.make_node("Cast", ["x"], ["xb"], to=activation_type),
             helper.make_node("Mul", ["xb", "xb"], ["m"]),
             helper.make_node("Add", ["m", "xb"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("MatMul", ["r", "w"], ["mm"]),
             helper.make_node("Sigmoid", ["mm"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(nodes, "bf16", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
                              [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_float16_weight_model_matches_onnxruntime() -> None:
    model = _float16_cnn()
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float16)
    session = session_for(model)
    ours, expected = run_lite(session, {"x": x})["p"], run_ort(model, {"x": x})["p"]
    assert ours.dtype == np.float16
    np.testing.assert_allclose(ours.astype(np.float32), expected.astype(np.float32), rtol=2e-3, atol=1e-3)
    assert session.GetInputs()[0].data_type() == lite.DataType.FLOAT16
    assert session.GetOutputByTensorName("p").data_type() == lite.DataType.FLOAT16


def test_bfloat16_activation_model_matches_onnxruntime_within_bfloat16_precision() -> None:
    """onnxruntime has no bfloat16 Mul or MatMul on the CPU: its float32 twin of the model is the oracle, and
    the difference is bounded by bfloat16's rounding (8 significant bits) at each op."""
    x = rng.standard_normal((2, 4)).astype(np.float32)
    ours = run_lite(session_for(_activation_model(TensorProto.BFLOAT16)), {"x": x})["y"]
    expected = run_ort(_activation_model(TensorProto.FLOAT), {"x": x})["y"]
    np.testing.assert_allclose(ours, expected, rtol=0, atol=4 * 2.0 ** -8)
    assert not np.allclose(ours, expected, rtol=0, atol=1e-6)      # bfloat16 rounding did happen


def test_bfloat16_inputs_and_outputs_through_the_session_api() -> None:
    nodes = [helper.make_node("Add", ["x", "x"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [3])])
    session = session_for(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    x = session.GetInputs()[0]
    assert x.data_type() == lite.DataType.BFLOAT16 == 45
    x.set_data(np.array([1.5, -2.0, 3.0], ml_dtypes.bfloat16))
    session.RunGraph()
    y = session.GetOutputByTensorName("y")
    assert y.data_type() == lite.DataType.BFLOAT16 and y.numpy().dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.numpy().astype(np.float32), [3.0, -4.0, 6.0])


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2fnuz,
                                   ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.float4_e2m1fn])
def test_narrow_constants_survive_the_format(dtype) -> None:
    """A constant of each type is stored (one element per byte for sub-byte types) and read back as a view."""
    values = np.array([0, 1, -1, 2, 3, 0.5] if "int" not in np.dtype(dtype).name else [0, 1, 2, 3, 4, 5])
    const = values.astype(np.float32).astype(dtype)
    nodes = [helper.make_node("Identity", ["c"], ["y"]), helper.make_node("Identity", ["x"], ["z"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(const.dtype),
                                                             [6]),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, [1])],
                              [numpy_helper.from_array(const, "c")])
    buf = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    model = lite.Model.Import(buf, len(buf))
    stored = next(t for t in model.tensors if t.data is not None and t.data.dtype == const.dtype)
    np.testing.assert_array_equal(stored.data.astype(np.float32), const.astype(np.float32))


def test_lite_runs_without_ml_dtypes_and_names_it_when_a_model_needs_it(tmp_path) -> None:
    """With ml_dtypes unimportable, float32 models run; a bfloat16 model fails with NotSupportedError."""
    for name, to in (("bf16", TensorProto.BFLOAT16), ("f32", TensorProto.FLOAT)):
        graph = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=to)], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                  [helper.make_tensor_value_info("y", to, [2])])
        (tmp_path / f"{name}.ms").write_bytes(convert(helper.make_model(graph, opset_imports=[
            helper.make_opsetid("", 13)])))
    script = f"""
import sys
sys.modules["ml_dtypes"] = None
import numpy as np
import lite

def session(name):
    buf = open({str(tmp_path)!r} + "/" + name + ".ms", "rb").read()
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())

s = session("f32")
s.GetInputs()[0].set_data(np.array([1.5, 2.0], np.float32))
s.RunGraph()
try:
    session("bf16")
except lite.NotSupportedError as e:
    assert "ml_dtypes" in str(e), e
    print("refused")
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused"
