"""fuse_pad: a zero Pad of H and W in front of a conv becomes the conv's own padding, for an explicitly padded
conv and for a VALID one (TFLite's ZeroPadding2D + VALID conv), and the result is onnxruntime's."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from tests.util import run_lite, run_ort


def _padded_conv(auto_pad: str, pads: list[int], value: float = 0.0, group: int = 1) -> object:
    """x -> 1x1 Conv (NHWC from here) -> Pad(pads, value) -> 3x3 stride-2 Conv(auto_pad) -> y."""
    rng = np.random.default_rng(0)
    consts = {"stem": rng.standard_normal((8, 3, 1, 1)).astype(np.float32),
              "w": rng.standard_normal((8, 8 // group, 3, 3)).astype(np.float32),
              "pads": np.array(pads, np.int64), "value": np.array(value, np.float32)}
    attrs = {"auto_pad": auto_pad} if auto_pad != "NOTSET" else {"pads": [1, 0, 0, 1]}
    nodes = [helper.make_node("Conv", ["x", "stem"], ["h"]),
             helper.make_node("Pad", ["h", "pads", "value"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["y"], strides=[2, 2], group=group, **attrs)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 11, 10])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("auto_pad,group", [("VALID", 1), ("VALID", 8), ("NOTSET", 1)])
def test_a_zero_pad_folds_into_the_conv(auto_pad: str, group: int) -> None:
    model = _padded_conv(auto_pad, [0, 0, 1, 0, 0, 0, 2, 1], group=group)
    graph = to_graph(model)
    assert "Pad" not in [n.op for n in graph.nodes]
    x = np.random.default_rng(1).standard_normal((1, 3, 11, 10)).astype(np.float32)
    data = to_bytes(graph)
    got = run_lite(lite.LiteSession.CreateSession(data, len(data), lite.Context()), {"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("auto_pad", ["VALID", "SAME_UPPER"])
def test_pads_it_cannot_fold_stay(auto_pad: str) -> None:
    """A non-zero pad value is no conv padding; a SAME conv's own pads depend on the padded size."""
    model = _padded_conv(auto_pad, [0, 0, 1, 0, 0, 0, 2, 1], value=1.0 if auto_pad == "VALID" else 0.0)
    assert "Pad" in [n.op for n in to_graph(model).nodes]


def _shared_pad(second: str) -> object:
    """x -> 1x1 Conv -> Pad -> a 3x3 VALID Conv and `second` (another such Conv, or a Relu) -> y, z."""
    rng = np.random.default_rng(0)
    consts = {"stem": rng.standard_normal((8, 3, 1, 1)).astype(np.float32),
              "w": rng.standard_normal((8, 8, 3, 3)).astype(np.float32),
              "v": rng.standard_normal((8, 1, 3, 3)).astype(np.float32),
              "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)}
    readers = {"Conv": helper.make_node("Conv", ["p", "v"], ["z"], strides=[2, 2], group=8),
               "Relu": helper.make_node("Relu", ["p"], ["z"])}
    nodes = [helper.make_node("Conv", ["x", "stem"], ["h"]), helper.make_node("Pad", ["h", "pads"], ["p"]),
             helper.make_node("Conv", ["p", "w"], ["y"]), readers[second]]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 10])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in "yz"],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("second,folds", [("Conv", True), ("Relu", False)])
def test_a_pad_folds_only_when_every_reader_absorbs_it(second: str, folds: bool) -> None:
    model = _shared_pad(second)
    graph = to_graph(model)
    assert ("Pad" not in [n.op for n in graph.nodes]) == folds
    x = np.random.default_rng(1).standard_normal((1, 3, 9, 10)).astype(np.float32)
    data = to_bytes(graph)
    got = run_lite(lite.LiteSession.CreateSession(data, len(data), lite.Context()), {"x": x})
    for name, want in run_ort(model, {"x": x}).items():
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
