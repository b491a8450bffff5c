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


def _onnxruntime_conv(x: np.ndarray, w: np.ndarray, stride: int, pad: int) -> np.ndarray:
    """onnxruntime's Conv kernel, unoptimized: what it runs for a QDQ model's unfused conv (a float model's Conv
    would get the NCHWc layout at its default level, which sums otherwise)."""
    import onnxruntime as ort
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], strides=[stride] * 2, pads=[pad] * 4)], "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(w, "w")])
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def test_stride_k_follows_the_gemm_shape() -> None:
    assert [mlas_order.stride_k(n, k) for n, k in [(3136, 576), (49, 4608), (25, 576), (196, 64), (8, 64)]] == [
        128, 256, 512, 64, 1024]


@pytest.mark.parametrize("path", ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(
    not HAVE_NUMBA, reason="numba not installed"))])
@pytest.mark.parametrize("case", CASES)
def test_sums_in_onnxruntimes_order(case: tuple, path: str) -> None:
    cin, cout, size, kernel, stride, pad = case
    rng = np.random.default_rng(sum(case))
    x = rng.standard_normal((1, cin, size, size)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, kernel, kernel)) * 0.1).astype(np.float32)
    want = _onnxruntime_conv(x, w, stride, pad).reshape(cout, -1)
    window = _window(size, kernel, stride, pad)
    g = Geometry(window, window, 1, cin, cout, 1)
    cols = np.full((g.depth, window.out ** 2), np.nan, np.float32)     # every value written
    mlas_order.columns(x[0].transpose(1, 2, 0), g, cols)
    a = mlas_order.weight_rows(w.transpose(0, 2, 3, 1), g)
    got = np.empty((cout, cols.shape[1]), np.float32)
    if path == "numpy":
        mlas_order.sgemm(a, cols, got)
    else:
        from lite.kernels.compiled import mlas_order as compiled
        compiled.sgemm.bind(got.size, a, cols, np.int64(mlas_order.stride_k(cols.shape[1], g.depth)), got)()
    np.testing.assert_array_equal(got, want)
    exact = (a.astype(np.float64) @ cols.astype(np.float64)).astype(np.float32)
    assert (exact != want).mean() > 0.3            # the order decides most values' last bits
