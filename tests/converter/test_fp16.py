"""`--fp16=on` (converter/quant/fp16.py): float16 weights in the file, float32 compute; float16 compute where the
CPU device has `enable_float16` (lite.kernel.Float16Compute). Oracle: onnxruntime on the same model with its
weights (and inputs) rounded to float16 by numpy, and on the float model."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import lite
import models
from converter import convert
from converter.cli import main
from tests.util import relative_to_range, run_lite, run_ort

RNG = np.random.default_rng(11)


@pytest.fixture(scope="module")
def lenet() -> onnx.ModelProto:
    return models.build("lenet5", num_classes=10, input_size=32, batch=1)


def rounded_to_float16(model: onnx.ModelProto) -> onnx.ModelProto:
    rounded = onnx.ModelProto()
    rounded.CopyFrom(model)
    for init in rounded.graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32:
            init.CopyFrom(numpy_helper.from_array(array.astype(np.float16).astype(np.float32), init.name))
    return rounded


def run_buf(buf: bytes, feeds: dict[str, np.ndarray], float16: bool = False) -> dict[str, np.ndarray]:
    device = lite.DeviceContext(lite.DeviceType.DT_CPU, lite.CpuDeviceInfo(enable_float16=float16))
    return run_lite(lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, device_list=[device])),
                    feeds)


def as_float16(y: np.ndarray) -> np.ndarray:
    return y.astype(np.float16).astype(np.float32)


def conv_model() -> onnx.ModelProto:
    w = numpy_helper.from_array(RNG.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal(8).astype(np.float32), "b")
    node = onnx.helper.make_node("Conv", ["input", "w", "b"], ["y"], pads=[1, 1, 1, 1])
    graph = onnx.helper.make_graph([node], "conv", [onnx.helper.make_tensor_value_info(
        "input", onnx.TensorProto.FLOAT, [1, 3, 10, 10])], [onnx.helper.make_tensor_value_info(
            "y", onnx.TensorProto.FLOAT, None)], [w, b])
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])


def test_enable_float16_convolves_float16_operands_into_a_float16_result():
    """Float16 input and weights, float32 sums (as onnxruntime's float32 Conv on the rounded operands), one
    rounding of the result: at most one float16 step apart where the sums' order differs."""
    model = conv_model()
    x = RNG.standard_normal((1, 3, 10, 10)).astype(np.float32) * 3
    ours = run_buf(convert(model), {"input": x}, float16=True)["y"]
    oracle = as_float16(run_ort(rounded_to_float16(model), {"input": as_float16(x)})["y"])
    assert np.array_equal(ours, as_float16(ours))
    step = np.spacing(np.abs(oracle).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(ours - oracle) <= step)
    assert np.mean(ours == oracle) > 0.95


@pytest.mark.parametrize("name", ["lenet5", "mobilenet_v2"])
def test_enable_float16_stays_within_float16_precision_and_is_off_by_default(name):
    """The logits' SQNR against the float model with float16 compute is within 3 dB of onnxruntime's with the
    weights and input rounded to float16 (lenet5 66 vs 65 dB, the sensitive seeded mobilenet_v2 31 vs 35 dB);
    without the flag the session computes in float32."""
    model = models.build(name, num_classes=10, input_size=32, batch=1)
    x = {"input": RNG.standard_normal((1, 1 if name == "lenet5" else 3, 32, 32)).astype(np.float32)}
    buf = convert(model)
    exact = next(iter(run_ort(model, x).values())).astype(np.float64)

    def sqnr(y: np.ndarray) -> float:
        return 10 * np.log10(np.sum(exact ** 2) / np.sum((y - exact) ** 2))
    default, half = next(iter(run_buf(buf, x).values())), next(iter(run_buf(buf, x, float16=True).values()))
    rounded = next(iter(run_ort(rounded_to_float16(model), {"input": as_float16(x["input"])}).values()))
    assert relative_to_range(default, exact) < 1e-5                 # float32 unless asked
    assert np.array_equal(half, as_float16(half))                   # the last op computed in float16
    assert sqnr(rounded) - 3 < sqnr(half) < 80


def test_fp16_file_is_half_and_computes_with_rounded_weights(lenet):
    """LeNet's weights reach the file unfolded, so the oracle can round the very same values."""
    x = {"input": RNG.standard_normal((1, 1, 32, 32)).astype(np.float32)}
    half, full = convert(lenet, fp16=True), convert(lenet)
    assert len(half) <= 0.52 * len(full)               # the graph's own ~3 KB are 1.3 % of LeNet's file
    assert any(t.data_type == lite.DataType.FLOAT16 for t in lite.Model.Import(half).tensors)
    ours = run_buf(half, x)
    rounded, exact = run_ort(rounded_to_float16(lenet), x), run_ort(lenet, x)
    for name, y in ours.items():
        assert relative_to_range(y, rounded[name]) < 1e-5          # float32 compute on float16 weights
        assert relative_to_range(y, exact[name]) < 2e-3            # float16 precision of the float model
        assert relative_to_range(y, exact[name]) > 1e-6            # the weights were rounded


def test_fp16_mobilenet_stays_within_float16_precision():
    """MobileNetV2 (batch norm folded into the convolutions before rounding): the logits' SQNR against the
    float model is what onnxruntime gets with the source weights rounded to float16 (this seeded network is
    sensitive: about 30 dB)."""
    model = models.build("mobilenet_v2", num_classes=10, input_size=32, batch=1)
    half, full = convert(model, fp16=True), convert(model)
    assert len(half) <= 0.51 * len(full)
    x = {"input": RNG.standard_normal((1, 3, 32, 32)).astype(np.float32)}
    ref = next(iter(run_ort(model, x).values())).astype(np.float64)

    def sqnr(y: np.ndarray) -> float:
        return 10 * np.log10(np.sum(ref ** 2) / np.sum((y - ref) ** 2))
    oracle = sqnr(next(iter(run_ort(rounded_to_float16(model), x).values())))
    assert sqnr(next(iter(run_buf(half, x).values()))) > oracle - 1


def test_fp16_keeps_constants_float16_cannot_hold():
    from converter.ir import Graph, Node, Value
    from converter.quant.fp16 import store_float16
    g = Graph()
    g.values["x"] = Value("x", (4,), np.dtype(np.float32))
    g.values["y"] = Value("y", (4,), np.dtype(np.float32))
    g.values["z"] = Value("z", (4,), np.dtype(np.float32))
    big, small = g.add_const(np.full(4, 1e6, np.float32), "big"), g.add_const(np.full(4, 0.5, np.float32), "small")
    g.inputs, g.outputs = ["x"], ["z"]
    g.nodes = [Node("Mul", "mul", ["x", big], ["y"]), Node("Add", "add", ["y", small], ["z"])]
    store_float16(g, min_size=0)
    dtypes = {n.op: g.values[n.inputs[1]].dtype for n in g.nodes if n.op in ("Mul", "Add")}
    assert dtypes["Mul"] == np.float32 and g.producer(g.nodes[-1].inputs[1]) is not None
    x = RNG.standard_normal(4).astype(np.float32)
    from converter.export import to_bytes
    np.testing.assert_allclose(run_buf(to_bytes(g), {"x": x})["z"], x * 1e6 + 0.5, rtol=1e-6)


def test_cli_fp16_on_writes_float16_weights(tmp_path, capsys):
    path = tmp_path / "lenet.onnx"
    onnx.save(models.build("lenet5", num_classes=10, input_size=32, batch=1), path)
    assert main(["--fmk=ONNX", f"--modelFile={path}", f"--outputFile={tmp_path / 'half'}", "--fp16=on"]) == 0
    assert main(["--fmk=ONNX", f"--modelFile={path}", f"--outputFile={tmp_path / 'full'}"]) == 0
    assert (tmp_path / "half.ms").stat().st_size <= 0.52 * (tmp_path / "full.ms").stat().st_size


def test_cli_fp16_with_quantization_names_the_conflict(tmp_path, capsys):
    path = tmp_path / "lenet.onnx"
    onnx.save(models.build("lenet5", num_classes=10, input_size=32, batch=1), path)
    args = ["--fmk=ONNX", f"--modelFile={path}", f"--outputFile={tmp_path / 'q'}", "--fp16=on",
            "--quantType=WeightQuant", "--bitNum=8"]
    assert main(args) == lite.RET_INPUT_PARAM_INVALID
    assert "--fp16=on cannot be combined with --quantType" in capsys.readouterr().err
