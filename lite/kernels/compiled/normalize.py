"""Compiled row passes of the normalising ops, one threaded pass per row instead of several numpy passes over the
tensor: Softmax along the last axis (exp written out, `vector_exp`) and LayerNorm over the last axis with its
scale and bias. Results agree with the numpy kernels within float32 rounding (the sums run in another order)."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import prange
from lite.kernels.compiled.vector_exp import EXP_MIN, exp32
from lite.kernels.compiled.vector_reduce import row_sum


@Compiled
def softmax_rows(x, out):  # pragma: no cover
    """out[m] = exp(x[m] - max x[m]) / sum, for x, out [M, K] (distinct arrays, so the passes vectorise). A row
    holding a NaN or whose peak is infinite (a fully masked row is all -inf) is NaN, as numpy's exp gives it:
    exp32 must never see a NaN, whose table index would be out of bounds."""
    rows, depth = x.shape
    for m in prange(rows):
        peak = x[m, 0]
        nans = 0
        for k in range(depth):
            peak = max(peak, x[m, k])
            nans += x[m, k] != x[m, k]
        if nans or not peak - peak == 0:
            out[m, :] = np.nan
            continue
        for k in range(depth):
            out[m, k] = exp32(max(x[m, k] - peak, EXP_MIN))
        total = row_sum(out[m])
        for k in range(depth):
            out[m, k] /= total


@Compiled
def layer_norm_rows(x, epsilon, scale, bias, out, work):  # pragma: no cover
    """out[m] = (x[m] - mean) / sqrt(variance + epsilon) * scale + bias for x, out [M, K], scale and bias [K];
    work [M, K] holds the squared deviations."""
    rows, depth = x.shape
    size = np.float32(depth)
    for m in prange(rows):
        mean = row_sum(x[m]) / size
        for k in range(depth):
            d = x[m, k] - mean
            work[m, k] = d * d
        invstd = np.float32(1.0) / np.sqrt(row_sum(work[m]) / size + epsilon)
        for k in range(depth):
            out[m, k] = (x[m, k] - mean) * invstd * scale[k] + bias[k]
