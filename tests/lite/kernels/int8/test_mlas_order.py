"""`mlas_order`: onnxruntime's float32 Conv (an MLAS GEMM over im2col columns) summed in its order, bit for bit, on
both paths; the exact sum rounded to float32 differs from it in most values, so the order is what is checked."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from lite.kernels._conv_math import Window
from lite.kernels.conv2d import Geometry
from lite.kernels.int8 import mlas_order

HAVE_NUMBA = importlib.util.find_spec("numba") is not None

# (channels in, out, size, kernel, stride, pad): K blocks of 128 (two of them: K = 144), 256 and 512 (N of 49 and
# 25 columns), a 1x1 conv
CASES = [(16, 24, 14, 3, 1, 1), (128, 16, 7, 3, 1, 1), (64, 8, 9, 3, 2, 1), (160, 32, 6, 1, 1, 0)]


def _window(size: int, kernel: int, stride: int, pad: int) -> Window:
    return Window(size, kernel, stride, 1, pad, pad, (size + 2 * pad - kernel) // stride + 1)


def _onnxruntime_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int,
                      bias: np.ndarray | None = None) -> np.ndarray:
    """onnxruntime's Conv kernel, unoptimized: what it runs for a QDQ model's unfused conv (a float model's Conv
    would get the NCHWc layout at its default level, which sums otherwise)."""
    import onnxruntime as ort
    weights = [w] if bias is None else [w, bias]
    names = ["w", "b"][:len(weights)]
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", *names], ["y"], strides=[stride] * 2, pads=[pad] * 4)], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, name) for v, name in zip(weights, names)])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def _geometry(case: tuple) -> Geometry:
    cin, cout, size, kernel, stride, pad = case
    window = _window(size, kernel, stride, pad)
    return Geometry(window, window, 1, cin, cout, 1)


def test_stride_k_follows_the_gemm_shape() -> None:
    assert [mlas_order.stride_k(n, k) for n, k in [(3136, 576), (49, 4608), (25, 576), (196, 64), (8, 64)]] == [
        128, 256, 512, 64, 1024]


@pytest.mark.parametrize("case", CASES)
def test_sums_in_onnxruntimes_order(case: tuple) -> None:
    cin, cout, size, kernel, stride, pad = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, kernel, kernel)) * 0.1).astype(np.float32)
    want = _onnxruntime_conv(x, w, stride, pad).reshape(cout, -1)
    g = _geometry(case)
    cols = np.full((g.depth, want.shape[1]), np.nan, np.float32)     # every value written
    mlas_order.columns(x[0].transpose(1, 2, 0), g, cols)
    a = mlas_order.weight_rows(w.transpose(0, 2, 3, 1), g)
    got = np.empty_like(want)
    mlas_order.sgemm(a, cols, got)
    np.testing.assert_array_equal(got, want)
    exact = (a.astype(np.float64) @ cols.astype(np.float64)).astype(np.float32)
    assert (exact != want).mean() > 0.3            # the order decides most values' last bits


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("case", CASES)
def test_compiled_conv_sums_adds_the_bias_and_quantizes_as_onnxruntime(case: tuple) -> None:
    """The fused kernel's float32 output (in its scratch) equals onnxruntime's Conv with a bias bit for bit, and
    its int8 output is QuantizeLinear of it."""
    from lite.kernels.compiled import mlas_order as compiled
    cin, cout, size, kernel, stride, pad = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, kernel, kernel)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    want = _onnxruntime_conv(x, w, stride, pad, bias).reshape(cout, -1).T
    g = _geometry(case)
    pixels = np.full((want.shape[0], g.depth), np.nan, np.float32)
    mlas_order.columns(x[0].transpose(1, 2, 0), g, pixels, by_pixel=True)
    a = mlas_order.weight_rows(w.transpose(0, 2, 3, 1), g)
    y, q = np.full(want.shape, np.nan, np.float32), np.zeros(want.shape, np.int8)
    scale, zero_point = np.float32(np.abs(want).max() / 100), np.float32(3)
    compiled.conv.bind(0, pixels, compiled.pack_panels(a), np.int64(mlas_order.stride_k(*pixels.shape)),
                       compiled.pad_bias(bias, cout), scale, zero_point, np.float32(-128), np.float32(127), y, q)()
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(q, np.clip(np.rint(want / scale) + zero_point, -128, 127).astype(np.int8))
