"""A Conv1D exported as Unsqueeze -> Conv -> Squeeze -> Add(bias) (tf2onnx, jax2tf) keeps NHWC from the conv to its
global max pool: to_nhwc moves its transposes through Squeeze and Unsqueeze, remove_identity drops the full Slices
between them, so no Transpose is left, and sink_squeeze lets the bias fold into the conv; the converted models match
onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from tests.util import relative_to_range, run_lite, run_ort, session_for

rng = np.random.default_rng(0)
BIG = np.iinfo(np.int64).max


def conv1d_model(step: int = 1) -> onnx.ModelProto:
    """x [N, L, C] -> Conv1D (as a 5x1 Conv2D) -> + bias -> tanh -> max over L -> [N, 8]; `step` is the
    Slice's step over the conv's last (size-1) axis and its length axis (-1 reverses the length axis)."""
    consts = {"unsq": np.array([3], np.int64), "w": rng.standard_normal((8, 4, 5, 1)).astype(np.float32),
              "starts": np.array([0, 0 if step > 0 else -1], np.int64),
              "ends": np.array([BIG, BIG if step > 0 else -BIG], np.int64), "axes": np.array([3, 2], np.int64),
              "steps": np.array([1, step], np.int64), "sq": np.array([3], np.int64),
              "bias": rng.standard_normal((1, 8, 1)).astype(np.float32), "last": np.array([2], np.int64)}
    nodes = [helper.make_node("Unsqueeze", ["x", "unsq"], ["x4"]),
             helper.make_node("Transpose", ["x4"], ["nchw"], perm=[0, 2, 1, 3]),
             helper.make_node("Conv", ["nchw", "w"], ["conv"], kernel_shape=[5, 1]),
             helper.make_node("Slice", ["conv", "starts", "ends", "axes", "steps"], ["sliced"]),
             helper.make_node("Squeeze", ["sliced", "sq"], ["ncl"]),
             helper.make_node("Add", ["ncl", "bias"], ["biased"]), helper.make_node("Tanh", ["biased"], ["t"]),
             helper.make_node("GlobalMaxPool", ["t"], ["pooled"]),
             helper.make_node("Squeeze", ["pooled", "last"], ["y"])]
    graph = helper.make_graph(nodes, "conv1d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 12, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("step", [1, -1], ids=["full_slice", "reversing_slice"])
def test_conv1d_keeps_nhwc_and_matches_onnxruntime(step: int) -> None:
    model = conv1d_model(step)
    ops = [n.op for n in to_graph(model).nodes]
    assert ops.count("Slice") == (step < 0)                  # a reversing Slice is not an identity
    if step > 0:
        assert "Transpose" not in ops and "Add" not in ops, ops
    x = rng.standard_normal((2, 12, 4)).astype(np.float32)
    ours = run_lite(session_for(model), {"x": x})["y"]
    assert relative_to_range(ours, run_ort(model, {"x": x})["y"]) <= 1e-5


@pytest.mark.parametrize("op", ["Sub", "Div"])
def test_a_constant_first_operand_keeps_its_place_below_the_squeeze(op: str) -> None:
    """c - Squeeze(x) and c / Squeeze(x): the op moves above the Squeeze with c widened, c still first."""
    consts = {"axes": np.array([1], np.int64), "c": rng.uniform(1, 2, (3, 1)).astype(np.float32)}
    nodes = [helper.make_node("Squeeze", ["x", "axes"], ["s"]), helper.make_node(op, ["c", "s"], ["y"])]
    graph = helper.make_graph(nodes, "sink", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert [n.op for n in to_graph(model).nodes] == [op, "Squeeze"]
    x = rng.uniform(1, 2, (3, 1, 4)).astype(np.float32)
    np.testing.assert_array_equal(run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"])


@pytest.mark.parametrize("axes", [[0], [1], [3], [1, 4]], ids=["first", "middle", "last", "two"])
def test_unsqueeze_after_a_conv_matches_onnxruntime(axes: list[int]) -> None:
    """Conv (NHWC inside) -> Squeeze of W -> Unsqueeze anywhere -> Relu: to_nhwc puts the new dims into the
    NHWC tensor and renumbers the transpose after it."""
    consts = {"w": rng.standard_normal((6, 3, 3, 1)).astype(np.float32), "sq": np.array([3], np.int64),
              "unsq": np.array(axes, np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 1]),
             helper.make_node("Squeeze", ["c", "sq"], ["s"]), helper.make_node("Unsqueeze", ["s", "unsq"], ["u"]),
             helper.make_node("Relu", ["u"], ["y"])]
    graph = helper.make_graph(nodes, "unsqueeze", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    x = rng.standard_normal((2, 3, 9, 1)).astype(np.float32)
    ours, want = run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"]
    assert ours.shape == want.shape and relative_to_range(ours, want) <= 1e-5
