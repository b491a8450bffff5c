"""conv_before_resize: a 1x1 conv reading an upsampling Resize runs before it (its activation after it), and the
result is onnxruntime's; other convs and resizes stay in order."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from tests.util import run_lite, run_ort


def _resize_then_conv(mode: str, by: str, out_size: int = 12, kernel: int = 1) -> object:
    """x [1, 3, 5, 6] -> 3x3 Conv to 8 channels -> Resize (`mode`, by `by`) -> `kernel` Conv to 4 -> Relu -> y."""
    rng = np.random.default_rng(0)
    consts = {"a": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
              "w": rng.standard_normal((4, 8, kernel, kernel)).astype(np.float32),
              "b": rng.standard_normal(4).astype(np.float32), "roi": np.zeros(0, np.float32),
              "scales": np.array([1, 1, out_size / 5, out_size / 6], np.float32) if by == "scales" else np.zeros(0, np.float32)}
    resize_inputs = ["h", "roi", "scales"]
    if by == "sizes":
        consts["sizes"] = np.array([1, 8, out_size, out_size], np.int64)
        resize_inputs.append("sizes")
    nodes = [helper.make_node("Conv", ["x", "a"], ["h"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", resize_inputs, ["r"], mode=mode),
             helper.make_node("Conv", ["r", "w", "b"], ["c"]), helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _conv_reads_resize(model: object) -> bool:
    graph = to_graph(model)
    convs = [n for n in graph.nodes if n.op == "Conv2D"]
    return any(graph.producer(c.inputs[0]) is not None and graph.producer(c.inputs[0]).op == "Resize" for c in convs)


@pytest.mark.parametrize("mode,by", [("linear", "scales"), ("linear", "sizes"), ("nearest", "sizes")])
def test_a_pointwise_conv_runs_before_the_upsampling(mode: str, by: str) -> None:
    model = _resize_then_conv(mode, by)
    graph = to_graph(model)
    ops = [n.op for n in graph.nodes]
    assert ops.index("Resize") > max(k for k, op in enumerate(ops) if op == "Conv2D"), ops
    x = np.random.default_rng(1).standard_normal((1, 3, 5, 6)).astype(np.float32)
    data = to_bytes(graph)
    got = run_lite(lite.LiteSession.CreateSession(data, len(data), lite.Context()), {"x": x})["y"]
    np.testing.assert_allclose(got, run_ort(model, {"x": x})["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("out_size,kernel", [(12, 3), (3, 1)])
def test_wider_convs_and_downsampling_keep_their_order(out_size: int, kernel: int) -> None:
    assert _conv_reads_resize(_resize_then_conv("linear", "sizes", out_size, kernel))
