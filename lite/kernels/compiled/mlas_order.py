"""The compiled form of `lite.kernels.int8.mlas_order.sgemm`: onnxruntime's float32 GEMM order with true fused
multiply-adds (LLVM's fma, which the loops over a tile of columns vectorise), four rows of the output at a time
(each column of b loaded once for the four), and the QuantizeLinear after it."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import F32, cgutils, intrinsic, ir, prange, types

COLUMNS = 256         # columns a task sums at once: its K x COLUMNS slab of b stays in cache
ROWS = 4              # rows of a summed at once


@intrinsic
def fma32(typingctx, a, b, c):
    """a * b + c in float32, rounded once."""
    def codegen(context, builder, signature, args):
        fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(F32, [F32] * 3), "llvm.fma.f32")
        return builder.call(fma, args)
    return types.float32(types.float32, types.float32, types.float32), codegen


@Compiled
def sgemm(a, b, block, out):  # pragma: no cover
    """out [M, N] = a [M, K] @ b [K, N] (float32) in MLAS's order: per K block of `block`, fused multiply-adds
    from zero in k order, the block sums added in block order."""
    k, n = b.shape
    m = a.shape[0]
    for task in prange((n + COLUMNS - 1) // COLUMNS):
        p0 = task * COLUMNS
        width = min(n, p0 + COLUMNS) - p0
        acc = np.empty((ROWS, width), np.float32)
        for o0 in range(0, m, ROWS):
            rows = min(ROWS, m - o0)
            for k0 in range(0, k, block):
                acc[:] = 0
                for kk in range(k0, min(k, k0 + block)):
                    if rows == ROWS:
                        w0, w1, w2, w3 = a[o0, kk], a[o0 + 1, kk], a[o0 + 2, kk], a[o0 + 3, kk]
                        for p in range(width):
                            v = b[kk, p0 + p]
                            acc[0, p] = fma32(w0, v, acc[0, p])
                            acc[1, p] = fma32(w1, v, acc[1, p])
                            acc[2, p] = fma32(w2, v, acc[2, p])
                            acc[3, p] = fma32(w3, v, acc[3, p])
                    else:
                        for r in range(rows):
                            w = a[o0 + r, kk]
                            for p in range(width):
                                acc[r, p] = fma32(w, b[kk, p0 + p], acc[r, p])
                for r in range(rows):
                    for p in range(width):
                        out[o0 + r, p0 + p] = acc[r, p] if k0 == 0 else out[o0 + r, p0 + p] + acc[r, p]


@Compiled
def quantize_columns(y, scale, zero_point, lo, hi, out):  # pragma: no cover
    """QuantizeLinear of y [O, L] into out [L, O]: clamp(rint(y / scale) + zero_point, lo, hi), in float32."""
    m, n = y.shape
    for p in prange(n):
        for o in range(m):
            q = np.rint(y[o, p] / scale) + zero_point
            out[p, o] = lo if q < lo else hi if q > hi else q
