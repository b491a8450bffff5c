"""fuse_layer_norm on the moments form of flax's LayerNorm as jax2tf exports it: mean = Sum(x) / n,
var = max(Sum(x * x) / n - mean^2, 0), keep-dims shapes restored by Reshape, 1 / Sqrt(var + eps) times the scale.
Over trailing axes it becomes one LayerNorm matching onnxruntime running the spelled-out graph; over another axis
it is left alone."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from tests.util import relative_to_range, run_lite, run_ort, session_for

rng = np.random.default_rng(0)
SHAPE = (3, 5, 8)


def moments_layer_norm(axis: int, bias: bool = True) -> onnx.ModelProto:
    kept = [1 if a == axis else d for a, d in enumerate(SHAPE)]
    param = [d if a == axis else 1 for a, d in enumerate(SHAPE)]
    consts = {"axes": np.array([axis], np.int64), "inv_n": np.array(1 / SHAPE[axis], np.float32),
              "zero": np.array(0, np.float32), "eps": np.array(1e-6, np.float32),
              "kept": np.array(kept, np.int64), "gamma": rng.uniform(0.5, 1.5, param).astype(np.float32),
              "beta": rng.standard_normal(param).astype(np.float32)}
    nodes = [helper.make_node("ReduceSum", ["x", "axes"], ["s1"], keepdims=0),
             helper.make_node("Mul", ["s1", "inv_n"], ["mean"]),
             helper.make_node("Mul", ["x", "x"], ["sq"]),
             helper.make_node("ReduceSum", ["sq", "axes"], ["s2"], keepdims=0),
             helper.make_node("Mul", ["s2", "inv_n"], ["ex2"]),
             helper.make_node("Mul", ["mean", "mean"], ["m2"]),
             helper.make_node("Sub", ["ex2", "m2"], ["v0"]),
             helper.make_node("Max", ["zero", "v0"], ["var"]),
             helper.make_node("Reshape", ["var", "kept"], ["var_b"]),
             helper.make_node("Add", ["var_b", "eps"], ["ve"]),
             helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Reciprocal", ["sd"], ["r"]),
             helper.make_node("Mul", ["r", "gamma"], ["scale"]),
             helper.make_node("Reshape", ["mean", "kept"], ["mean_b"]),
             helper.make_node("Sub", ["x", "mean_b"], ["d"]),
             helper.make_node("Mul", ["d", "scale"], ["y" if not bias else "n"])]
    if bias:
        nodes.append(helper.make_node("Add", ["n", "beta"], ["y"]))
    graph = helper.make_graph(nodes, "flax_layer_norm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("axis,bias", [(2, True), (2, False), (1, True)], ids=["last", "last_no_bias", "middle"])
def test_moments_layer_norm_fuses_over_trailing_axes_and_matches_onnxruntime(axis: int, bias: bool) -> None:
    model = moments_layer_norm(axis, bias)
    ops = collections.Counter(n.op for n in to_graph(model).nodes)
    assert ops["LayerNorm"] == (axis == len(SHAPE) - 1)
    if ops["LayerNorm"]:
        assert list(ops) == ["LayerNorm"], ops
    x = (rng.standard_normal(SHAPE) * 2 + 3).astype(np.float32)
    ours, want = run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"]
    assert relative_to_range(ours, want) <= 1e-5
