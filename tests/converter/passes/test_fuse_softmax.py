"""fuse_softmax: the spelled-out softmax of TensorFlow and jax2tf exports (ReduceMax, its -inf floor, Exp of the
difference, ReduceSum, Div; keep-dims shapes restored by Reshape) becomes one Softmax matching onnxruntime; a sum
over another axis than the maximum's is left alone."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from tests.util import relative_to_range, run_lite, run_ort, session_for

SHAPE = (2, 5, 7)


def spelled_softmax(max_axis: int, sum_axis: int, keepdims: bool) -> onnx.ModelProto:
    kept = lambda a: [1 if k == a else d for k, d in enumerate(SHAPE)]  # noqa: E731
    consts = {"max_axes": np.array([max_axis], np.int64), "sum_axes": np.array([sum_axis], np.int64),
              "floor": np.array(-np.inf, np.float32), "max_kept": np.array(kept(max_axis), np.int64),
              "sum_kept": np.array(kept(sum_axis), np.int64)}
    nodes = [helper.make_node("ReduceMax", ["x"], ["m0"], axes=[max_axis], keepdims=int(keepdims)),
             helper.make_node("Max", ["floor", "m0"], ["m1"])]
    nodes += [] if keepdims else [helper.make_node("Reshape", ["m1", "max_kept"], ["m"])]
    nodes += [helper.make_node("Sub", ["x", "m1" if keepdims else "m"], ["d"]), helper.make_node("Exp", ["d"], ["e"]),
              helper.make_node("ReduceSum", ["e", "sum_axes"], ["s0"], keepdims=int(keepdims))]
    nodes += [] if keepdims else [helper.make_node("Reshape", ["s0", "sum_kept"], ["s"])]
    nodes += [helper.make_node("Div", ["e", "s0" if keepdims else "s"], ["y"])]
    graph = helper.make_graph(nodes, "softmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("max_axis,sum_axis,keepdims", [(2, 2, False), (1, 1, True), (1, 2, False)],
                         ids=["last_jax", "middle_keepdims", "mixed_axes"])
def test_spelled_out_softmax_fuses_and_matches_onnxruntime(max_axis: int, sum_axis: int, keepdims: bool) -> None:
    model = spelled_softmax(max_axis, sum_axis, keepdims)
    ops = collections.Counter(n.op for n in to_graph(model).nodes)
    assert (list(ops) == ["Softmax"]) == (max_axis == sum_axis), ops
    x = (np.random.default_rng(0).standard_normal(SHAPE) * 20).astype(np.float32)
    assert relative_to_range(run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"]) <= 1e-6
