"""onnxruntime's float32 convolution as its CPU provider sums it, for the DQ -> Conv -> Q that its QDQ transformer
leaves unfused (`ONNXRUNTIME_FLOAT32`: the input's DequantizeLinear also feeds another node, as a residual Add).

onnxruntime runs such a Conv as an MLAS SGEMM per image, Y[O, L] = W[O, K] @ columns[K, L], the im2col rows in
(c, kh, kw) order. MLAS cuts K into blocks (`stride_k`); each block's dot product is summed from zero by
sequential fused multiply-adds and added to Y (the first block written), so the float32 result depends on that
order: the exact sum rounds to float32 differently in most values, and a value near a rounding tie of the
QuantizeLinear after it then quantizes differently. This order reproduces onnxruntime 1.32's outputs bit for bit
(ResNet-18's unfused convs on an AVX-512 host: 56x56, 14x14 and 7x7 layers, blocks of 128 and 256). It is MLAS's
one-thread split: a threaded GEMM with more columns than rows gives each thread its own run of columns, whose
width sets its K block, so there onnxruntime's sums depend on its thread count (not on the zoo's CNNs).
"""
from __future__ import annotations

import numpy as np

from lite.kernels._conv_math import Window
from lite.kernels.conv2d import Geometry

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
STRIDE = 128          # MLAS_SGEMM_STRIDEN and MLAS_SGEMM_STRIDEK


def stride_k(n: int, k: int) -> int:
    """MLAS's K block of an SGEMM with N columns and depth K (A not transposed): the N stride doubles while K
    fits in half the K stride, or the K stride doubles while N fits in half the N stride (down to 16)."""
    stride_n, stride = STRIDE, STRIDE
    if n >= k:
        while stride // 2 >= k:
            stride_n, stride = stride_n * 2, stride // 2
    else:
        while stride_n > 16 and stride_n // 2 >= n:
            stride_n, stride = stride_n // 2, stride * 2
    return stride


def weight_rows(w: np.ndarray, g: Geometry) -> np.ndarray:
    """OHWI weights [O, KH, KW, C] (dequantized float32) as the GEMM's A [O, K], K in (c, kh, kw) order."""
    return np.ascontiguousarray(w.reshape(g.out_channels, g.wh.kernel, g.ww.kernel, -1).transpose(0, 3, 1, 2)
                                .reshape(g.out_channels, -1))


def _taps(w: Window, tap: int) -> tuple[int, int, int]:
    """(first output, end output, first input) along one axis for kernel tap `tap`: the outputs whose input
    lies inside the data (the rest read padding)."""
    shift = tap * w.dilation - w.pad_begin                         # input = output * stride + shift
    first = min(w.out, max(0, -(-(-shift) // w.stride)))
    end = max(first, min(w.out, (w.size - 1 - shift) // w.stride + 1))
    return first, end, first * w.stride + shift


def columns(x: np.ndarray, g: Geometry, out: np.ndarray, by_pixel: bool = False) -> None:
    """onnxruntime's im2col of one NHWC image x [H, W, C] (float32) into out [K, L] (or its transpose [L, K] when
    `by_pixel`), K in (c, kh, kw) order, zeros where a tap falls in the padding (only those strips are written
    twice)."""
    wh, ww = g.wh, g.ww
    cols = (out.reshape(wh.out, ww.out, g.in_channels, wh.kernel, ww.kernel).transpose(2, 3, 4, 0, 1) if by_pixel
            else out.reshape(g.in_channels, wh.kernel, ww.kernel, wh.out, ww.out))
    for i in range(wh.kernel):
        r0, r1, y0 = _taps(wh, i)
        for j in range(ww.kernel):
            c0, c1, x0 = _taps(ww, j)
            tap = cols[:, i, j]
            tap[:, :r0] = tap[:, r1:] = tap[:, r0:r1, :c0] = tap[:, r0:r1, c1:] = 0
            if r1 > r0 and c1 > c0:
                rows = slice(y0, y0 + (r1 - r0 - 1) * wh.stride + 1, wh.stride)
                cs = slice(x0, x0 + (c1 - c0 - 1) * ww.stride + 1, ww.stride)
                cols[:, i, j, r0:r1, c0:c1] = x[rows, cs].transpose(2, 0, 1)


def sgemm(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """out [M, N] = a [M, K] @ b [K, N] in MLAS's order (float32): per K block, fused multiply-adds from zero in
    k order, the block sums then added in block order. A fused multiply-add here is the exact float64 product
    plus the float32 sum, rounded to float64 and then to float32 (equal to one rounding but where the float64
    sum falls on a float32 tie: rare, and the compiled kernel has a true one)."""
    m, k = a.shape
    block = stride_k(b.shape[1], k)
    acc = np.empty(out.shape, F32)
    wide = np.empty(out.shape, F64)
    for k0 in range(0, k, block):
        acc[...] = 0
        for kk in range(k0, min(k0 + block, k)):
            np.multiply(a[:, kk:kk + 1], b[kk], out=wide, dtype=F64)
            wide += acc
            acc[...] = wide
        if k0:
            out += acc
        else:
            out[...] = acc
