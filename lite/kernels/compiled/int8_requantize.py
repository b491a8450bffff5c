"""The compiled forms of `Requantizer` that are not one affine floor (which the fused epilogues of `conv` run): one
threaded pass over [M, C] accumulators of `float_form` with MindSpore Lite's second rounding (`Branch`: t below
the threshold lowered by its channel's step, where no clamp at the zero point hides it), or of `float32_form`,
onnxruntime's rule."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import prange


@Compiled
def requantize_rows_below(acc, scale, offset, step, threshold, lo, top, out):  # pragma: no cover
    """`float_form` with its branch over [M, C] accumulators (any layout), parameters per C: t = acc * scale +
    offset (multiply, then add, as numpy rounds them), lowered by step where below the threshold, clipped to
    [0, top], truncated, plus lo."""
    rows, cols = acc.shape
    for m in prange(rows):
        for o in range(cols):
            t = np.float64(acc[m, o]) * scale[o]
            t = t + offset[o]
            if t < threshold:
                t = t - step[o]
            if t < 0.0:
                t = 0.0
            elif t > top:
                t = top
            out[m, o] = np.int32(t) + lo


@Compiled
def requantize_rows_float32(acc, multiplier, bias, zero_point, lo, hi, out):  # pragma: no cover
    """`float32_form` over [M, C] accumulators (any layout), parameters per C: float32(acc + bias) times the
    float32 multiplier in float32, rounded half to even, clamped to [lo - zp, hi - zp], plus zp."""
    rows, cols = acc.shape
    for m in prange(rows):
        for o in range(cols):
            t = np.rint(np.float32(np.float64(acc[m, o]) + bias[o]) * np.float32(multiplier[o]))
            if t < lo - zero_point:
                t = lo - zero_point
            elif t > hi - zero_point:
                t = hi - zero_point
            out[m, o] = np.int32(t) + zero_point
