"""fuse_prelu: a PReLU after a conv becomes the conv's slope input, applied where the conv writes its output, and
the fused graph still computes what onnxruntime computes from the unfused ONNX model, on every conv path."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from converter.passes.fuse_prelu import SLOPE_INPUT, split_prelu
from tests.util import run_lite, run_ort

# (input channels, output channels, kernel, group, size): a 1x1 conv (the compiled GEMM on its input), a 3x3 conv
# (the GEMM reading windows in place), a small one (columns), a Winograd-sized one, a depthwise one and a first
# layer of 3 channels (the direct register tiles)
SHAPES = [(16, 24, 1, 1, 9), (16, 16, 3, 1, 9), (4, 8, 3, 1, 5), (16, 16, 3, 1, 20), (16, 16, 3, 16, 9),
          (3, 16, 3, 1, 12)]


def _block(cin: int, cout: int, k: int, group: int, size: int, residual: bool = False,
           slope_shape: tuple[int, ...] | None = None) -> object:
    """x -> 1x1 Conv -> h -> Conv (bias) [-> + h] -> PRelu(slope) -> out, in NCHW as ONNX writes it (the stem
    puts h in the converter's NHWC layout, so that the sum can be fused too)."""
    rng = np.random.default_rng(0)
    consts = {"w": rng.standard_normal((cout, cin // group, k, k)).astype(np.float32) * 0.3,
              "b": rng.standard_normal(cout).astype(np.float32),
              "slope": rng.uniform(-0.5, 0.5, slope_shape or (cout, 1, 1)).astype(np.float32),
              "stem": rng.standard_normal((cin, cin, 1, 1)).astype(np.float32) * 0.5}
    nodes = [helper.make_node("Conv", ["x", "stem"], ["h"]),
             helper.make_node("Conv", ["h", "w", "b"], ["conv"], pads=[k // 2] * 4, group=group)]
    prelu_in = "conv"
    if residual:
        nodes.append(helper.make_node("Add", ["conv", "h"], ["sum"]))
        prelu_in = "sum"
    nodes.append(helper.make_node("PRelu", [prelu_in, "slope"], ["out"]))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, cin, size, size])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _run(graph, x: np.ndarray, kernels: str) -> np.ndarray:
    data = to_bytes(graph)
    session = lite.LiteSession.CreateSession(data, len(data), lite.Context(thread_num=2, kernels=kernels))
    return run_lite(session, {"x": x})["out"]


def _fused(graph) -> list:
    return [n for n in graph.nodes if n.op == "Conv2D" and len(n.inputs) > SLOPE_INPUT]


@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fused_prelu_matches_onnxruntime(shape: tuple[int, ...], kernels: str) -> None:
    residual = shape[0] == shape[1]
    if kernels == "compiled":
        pytest.importorskip("numba")
    model = _block(*shape, residual=residual)
    graph = to_graph(model)
    assert "PReLU" not in [n.op for n in graph.nodes] and "Add" not in [n.op for n in graph.nodes]
    assert len(_fused(graph)) == 1
    x = np.random.default_rng(1).standard_normal((1, shape[0], shape[4], shape[4])).astype(np.float32)
    want = run_ort(model, {"x": x})["out"]
    assert (want < 0).any() and (want > 0).any()          # both sides of the slope are checked
    np.testing.assert_allclose(_run(graph, x, kernels), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def test_split_prelu_gives_the_node_back() -> None:
    model = _block(16, 16, 1, 1, 6, residual=True)
    graph = split_prelu(to_graph(model))
    assert not _fused(graph) and [n.op for n in graph.nodes].count("PReLU") == 1
    conv = graph.producer(next(n for n in graph.nodes if n.op == "PReLU").inputs[0])
    assert len(conv.inputs) == 4                               # x, w, bias and the residual sum remain
    x = np.random.default_rng(2).standard_normal((1, 16, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(_run(graph, x, "numpy"), run_ort(model, {"x": x})["out"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("slope_shape", [(16, 6, 1), (1, 6, 6)])
def test_slopes_not_per_channel_stay_a_prelu(slope_shape: tuple[int, ...]) -> None:
    graph = to_graph(_block(16, 16, 1, 1, 6, slope_shape=slope_shape))
    assert not _fused(graph) and "PReLU" in [n.op for n in graph.nodes]


def test_the_quantizer_splits_the_slope_off() -> None:
    """The int8 conv has no slope input: quantization gives the PReLU back as a node of its own."""
    from converter.quant import QuantConfig, quantize
    graph = to_graph(_block(16, 16, 1, 1, 6))
    samples = [{"x": np.random.default_rng(3).standard_normal((1, 16, 6, 6)).astype(np.float32)}]
    qgraph = quantize(graph, QuantConfig(preset="MINDSPORE_LITE"), samples)
    assert not _fused(qgraph) and "PReLU" in [n.op for n in qgraph.nodes]
