"""fuse_residual on channel-padded shortcuts (BlazeFace's blocks): Add(conv(x), Pad(s, zero channels appended))
becomes conv(x) with `s` itself as the residual, added to the first channels; against onnxruntime."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from converter.passes.fuse_residual import split_residuals
from tests.converter.passes.test_passes import _session, to_graph
from tests.util import run_lite, run_ort

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
PATHS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"))]
CONVS = {         # (kernel, group, height): the 1x1 GEMM on the rows themselves, a 3x3 on its windows, one with
    "1x1": (1, 1, 7),   # enough tiles for the compiled Winograd (which a narrower residual leaves for the GEMM)
    "3x3": (3, 1, 5),
    "3x3-winograd": (3, 1, 18),
}


def _block(kernel: int, size: int, channels: int = 20, extra: int = 12, pads: list[int] | None = None,
           act: str = "Relu") -> onnx.ModelProto:
    """x [1, channels] -> Conv1x1 = h, then Conv(h, k x k, channels + extra) + Pad(h, channels appended at the
    end) -> act (the first conv puts h in NHWC, where the channels are the last axis)."""
    rng = np.random.default_rng(kernel + size)
    out = channels + extra
    consts = {"w0": rng.standard_normal((channels, channels, 1, 1)).astype(np.float32) / 4,
              "w": rng.standard_normal((out, channels, kernel, kernel)).astype(np.float32) / kernel,
              "b": rng.standard_normal(out).astype(np.float32),
              "pads": np.array(pads or [0, 0, 0, 0, 0, extra, 0, 0], np.int64)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["h"]),
             helper.make_node("Conv", ["h", "w", "b"], ["y"], pads=[kernel // 2] * 4),
             helper.make_node("Pad", ["h", "pads"], ["r"]),
             helper.make_node("Add", ["y", "r"], ["s"]), helper.make_node(act, ["s"], ["out"])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, channels, size, size])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _feeds(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return {"x": np.random.default_rng(3).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("act", ["Relu", "Sigmoid"])
@pytest.mark.parametrize("case", CONVS)
def test_a_channel_padded_shortcut_is_added_to_the_first_channels(case: str, act: str, kernels: str) -> None:
    kernel, _, size = CONVS[case]
    model = _block(kernel, size, act=act)
    buf = convert(model)
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, kernels=kernels))
    ops = [step.node.op for step in s._plan.steps]
    assert "Pad" not in ops and "AddFusion" not in ops and "Add" not in ops
    conv = next(step for step in s._plan.steps if step.node.op == "Conv2D" and len(step.node.inputs) == 4)
    assert len(conv.node.inputs) == 4 and conv.inputs[3].shape[-1] == 20 and conv.outputs[0].shape[-1] == 32
    if kernels == "compiled":
        assert conv.kernel.fused_gemm and not conv.kernel.winograd_fused
        assert conv.kernel.inplace_input() is None          # the residual's rows are shorter than the output's
    feeds = _feeds(model)
    np.testing.assert_allclose(run_lite(s, feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pads", [[0, 0, 0, 0, 0, 12, 1, 0], [0, 12, 0, 0, 0, 0, 0, 0]], ids=["and-height", "begin"])
def test_a_pad_of_more_than_the_last_channels_stays(pads: list[int]) -> None:
    """Only zero channels appended after the last one: a Pad of other axes (here H too), or of channels in
    front, keeps its node."""
    model = _block(1, 6, pads=pads)
    if pads[6]:           # the padded height no longer matches: a shortcut of a taller map cannot be added
        model.graph.node[1].attribute[0].ints[:] = [0, 0, 1, 0]
    graph = to_graph(model)
    assert "Pad" in [n.op for n in graph.nodes]
    feeds = _feeds(model)
    np.testing.assert_allclose(run_lite(_session(graph), feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4,
                               atol=1e-4)


def test_quantization_splits_a_narrow_residual_back_through_its_pad() -> None:
    """split_residuals gives the Add the padded shortcut again (a Pad appending the zero channels)."""
    model = _block(1, 6)
    graph = to_graph(model)
    assert "Pad" not in [n.op for n in graph.nodes]
    split_residuals(graph)
    ops = [n.op for n in graph.nodes]
    assert ops.count("Pad") == 1 and ops.count("Add") == 1
    feeds = _feeds(model)
    np.testing.assert_allclose(run_lite(_session(graph), feeds)["out"], run_ort(model, feeds)["out"], rtol=1e-4,
                               atol=1e-4)


def test_the_official_format_writes_the_pad_back() -> None:
    """MindSpore Lite's format has no narrower residual: the writer puts a PadFusion before the AddFusion; our
    reader runs that file as onnxruntime."""
    model = _block(1, 6)
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Import(convert(model, save_type="MINDIR_LITE")))
    feeds = _feeds(model)
    [given] = session.GetInputs()
    given.set_data(feeds["x"])
    session.RunGraph()
    [out] = session.GetOutputs().values()
    np.testing.assert_allclose(out.numpy(), run_ort(model, feeds)["out"], rtol=1e-4, atol=1e-4)
