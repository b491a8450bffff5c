"""The compiled form of `lite.kernels.int8.mlas_order.sgemm`: onnxruntime's float32 GEMM order with true fused
multiply-adds (LLVM's fma, which the loop over a tile of columns vectorises)."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import F32, cgutils, intrinsic, ir, prange, types

COLUMNS = 256         # columns a task sums at once: its K x COLUMNS slab of b stays in cache


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
        acc = np.empty(width, np.float32)
        for o in range(m):
            for k0 in range(0, k, block):
                acc[:] = 0
                for kk in range(k0, min(k, k0 + block)):
                    w = a[o, kk]
                    for p in range(width):
                        acc[p] = fma32(w, b[kk, p0 + p], acc[p])
                if k0 == 0:
                    for p in range(width):
                        out[o, p0 + p] = acc[p]
                else:
                    for p in range(width):
                        out[o, p0 + p] = out[o, p0 + p] + acc[p]
