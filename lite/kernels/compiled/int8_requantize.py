"""The compiled form of `Requantizer` with MindSpore Lite's second rounding (`Branch`): one threaded pass of
`float_form` over [M, C] accumulators in which t below the threshold is lowered by its channel's step, for the
int8 layers whose requantization is not one affine floor (no clamp at the zero point), which the fused GEMM
epilogues of `int8` and `conv` cannot run."""
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
