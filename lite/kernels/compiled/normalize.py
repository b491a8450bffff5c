"""Compiled row passes of the normalising ops, one threaded pass per row instead of several numpy passes over the
tensor: Softmax along the last axis (exp written out, `vector_exp`) and LayerNorm over the last axis with its
scale and bias. Results agree with the numpy kernels within float32 rounding (the sums run in another order)."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import prange
from lite.kernels.compiled.vector_exp import EXP_MIN, exp32


@Compiled
def softmax_rows(x, out):  # pragma: no cover
    """out[m] = exp(x[m] - max x[m]) / sum, for x, out [M, K] (distinct arrays, so the passes vectorise)."""
    rows, depth = x.shape
    for m in prange(rows):
        peak = x[m, 0]
        for k in range(1, depth):
            peak = max(peak, x[m, k])
        total = np.float32(0.0)
        for k in range(depth):
            e = exp32(max(x[m, k] - peak, EXP_MIN))
            out[m, k] = e
            total += e
        for k in range(depth):
            out[m, k] /= total


@Compiled
def layer_norm_rows(x, epsilon, scale, bias, out):  # pragma: no cover
    """out[m] = (x[m] - mean) / sqrt(variance + epsilon) * scale + bias for x, out [M, K], scale and bias [K]."""
    rows, depth = x.shape
    size = np.float32(depth)
    for m in prange(rows):
        total = np.float32(0.0)
        for k in range(depth):
            total += x[m, k]
        mean = total / size
        squares = np.float32(0.0)
        for k in range(depth):
            d = x[m, k] - mean
            squares += d * d
        invstd = np.float32(1.0) / np.sqrt(squares / size + epsilon)
        for k in range(depth):
            out[m, k] = (x[m, k] - mean) * invstd * scale[k] + bias[k]
