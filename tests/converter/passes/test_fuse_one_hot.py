"""fuse_one_hot: Equal(x, arange(N)) -> Cast -> MatMul (+ bias), JAX's embedding, becomes a row lookup that
matches onnxruntime running the product bit for bit, indices outside [0, N) (negative, N and beyond: a zero
row, so the bias) included; other comparisons are left alone."""
from __future__ import annotations

import collections

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from tests.util import run_lite, run_ort, session_for

rng = np.random.default_rng(0)
N, D = 7, 5


def embedding(dtype: int, classes: np.ndarray, bias: bool = True) -> onnx.ModelProto:
    consts = {"shape": np.array([-1, 6, 1], np.int64), "classes": classes.reshape(1, 1, -1),
              "w": rng.standard_normal((len(classes), D)).astype(np.float32),
              "b": rng.standard_normal((1, 1, D)).astype(np.float32)}
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["x3"]),
             helper.make_node("Equal", ["x3", "classes"], ["hot"]),
             helper.make_node("Cast", ["hot"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["f", "w"], ["y" if not bias else "p"])]
    if bias:
        nodes.append(helper.make_node("Add", ["p", "b"], ["y"]))
    graph = helper.make_graph(nodes, "embedding", [helper.make_tensor_value_info("x", dtype, [2, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v.astype(np.int64) if k == "classes" and dtype ==
                                                       TensorProto.INT64 else v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("dtype", [TensorProto.INT32, TensorProto.INT64], ids=["int32", "int64"])
def test_one_hot_product_becomes_a_lookup_matching_onnxruntime(dtype: int, bias: bool) -> None:
    model = embedding(dtype, np.arange(N, dtype=np.int32), bias)
    ops = collections.Counter(n.op for n in to_graph(model).nodes)
    assert ops["Gather"] == 1 and not {"Compare", "FullConnection", "MatMul", "Add"} & set(ops), ops
    x = np.array([[0, 3, 6, 7, -1, 2], [-7, 100, 1, 5, -2**31 if dtype == TensorProto.INT32 else -2**62, 4]],
                 onnx.helper.tensor_dtype_to_np_dtype(dtype))
    ours, want = run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"]
    np.testing.assert_array_equal(ours, want)


@pytest.mark.parametrize("classes", [[0, 1, 2, 4], [1, 2, 3]], ids=["gap", "from_one"])
def test_other_comparisons_keep_the_product(classes: list[int]) -> None:
    model = embedding(TensorProto.INT32, np.array(classes, np.int32))
    ops = collections.Counter(n.op for n in to_graph(model).nodes)
    assert ops["Gather"] == 0 and ops["Compare"] == 1
    x = np.array([[0, 1, 2, 3, 4, 5], [-1, 2, 2, 1, 0, 9]], np.int32)
    np.testing.assert_array_equal(run_lite(session_for(model), {"x": x})["y"], run_ort(model, {"x": x})["y"])
