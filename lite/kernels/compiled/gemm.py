"""Compiled float32 GEMM with the bias and clamp fused: out [M, N] = clamp(x [M, K] @ w [K, N] + bias, lo, hi),
for the convolutions and FullConnection layers with a constant weight.

Why not BLAS: a small-M product (late layers at batch 1, M = 49) spends most of its time packing the weight,
which BLAS redoes on every call; here the weight is packed once, at bind, into column blocks of `NR` [K, NR]
that stream from memory in order. And the bias/clamp pass over the output is gone, as is a second thread pool
(BLAS's workers spinning beside the compiled kernels' on the same cores).

The register tile (`MR` rows x `NR` columns, twelve 8-lane accumulators) is written in LLVM IR (`_tile`):
per k, two weight vectors, one broadcast of x per row, and a fused multiply-add per accumulator (llvm.fma, so
sums round once per product as BLAS's FMA kernels do). Rows are cut into chunks of whole tiles (and, for short
M, the columns into spans), one chunk per task; rows past the last whole tile run one at a time, and the last
partial column block goes through a small buffer.
"""
from __future__ import annotations

import functools

import numpy as np

from llvmlite import ir
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.tiles import MR, NR, address, splat, task_rows, tasks

F32, I64 = ir.FloatType(), ir.IntType(64)
K_CHUNK = 256        # products summed per partial sum: sums of all K in one accumulator lost accuracy with K


def packing(weight: np.ndarray) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """(packed, copies): a zeroed float32 [N/NR blocks, K, NR] buffer, and the (destination, source) pairs that
    copy `weight` [K, N] into it (columns past N stay zero: they add nothing)."""
    k, n = weight.shape
    whole, rest = divmod(n, NR)
    packed = np.zeros((whole + (rest > 0), k, NR), np.float32)
    copies = [(packed[:whole].transpose(1, 0, 2), weight[:, :whole * NR].reshape(k, whole, NR))] if whole else []
    if rest:
        copies.append((packed[whole, :, :rest], weight[:, whole * NR:]))
    return packed, copies


def _tile_kernel(height: int, halves: int = NR // 8):
    """The register-tile intrinsic for `height` rows (MR, or 1 for the rows past the last whole tile) and the
    first `halves` 8-column halves of a block (1: a last block of 8 columns)."""
    @intrinsic
    def tile(typingctx, x, row, weight, block, depth, bias, col, lo, hi, out, out_row, out_col):
        """out[out_row + i, out_col + j] = clamp(sum_k x[row + i, k] w[k, block NR + j] + bias[col + j])
        for i < height, j < 8 halves."""
        sig = types.void(x, row, weight, block, depth, bias, col, lo, hi, out, out_row, out_col)
        return sig, functools.partial(_tile_code, height, halves)
    return tile


def _tile_code(height, halves, context, builder, signature, args):
    xa, r, wa, b, k_count, ba, c0, lo_v, hi_v, da, dr, dc = args
    kinds = signature.args
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    v8 = ir.VectorType(F32, 8)
    x_base, x_strides = address(context, builder, kinds[0], xa)
    x_stride, k_stride = builder.extract_value(x_strides, 0), builder.extract_value(x_strides, 1)
    x_base = builder.add(x_base, builder.mul(r, x_stride))
    w_base, _ = address(context, builder, kinds[2], wa)
    w_base = builder.add(w_base, builder.mul(b, builder.mul(k_count, const(4 * NR))))
    zero = ir.Constant(v8, [0.0] * 8)
    sums = [cgutils.alloca_once_value(builder, zero) for _ in range(height * halves)]
    accs = [cgutils.alloca_once_value(builder, zero) for _ in range(height * halves)]
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8] * 3), "llvm.fma.v8f32")
    chunks = builder.udiv(builder.add(k_count, const(K_CHUNK - 1)), const(K_CHUNK))
    with cgutils.for_range(builder, chunks) as outer:
        start = builder.mul(outer.index, const(K_CHUNK))
        remaining = builder.sub(k_count, start)
        length = builder.select(builder.icmp_signed("<", remaining, const(K_CHUNK)), remaining, const(K_CHUNK))
        for acc in accs:
            builder.store(zero, acc)
        with cgutils.for_range(builder, length) as loop:
            k = builder.add(start, loop.index)
            w_row = builder.add(w_base, builder.mul(k, const(4 * NR)))
            ws = [builder.load(builder.inttoptr(builder.add(w_row, const(32 * h)), v8.as_pointer()), align=4)
                  for h in range(halves)]
            x_k = builder.add(x_base, builder.mul(k, k_stride))
            for i in range(height):
                xv = builder.load(builder.inttoptr(builder.add(x_k, builder.mul(const(i), x_stride)),
                                                   F32.as_pointer()), align=4)
                xv = splat(builder, xv, v8)
                for h in range(halves):
                    acc = accs[i * halves + h]
                    builder.store(builder.call(fma, [xv, ws[h], builder.load(acc)]), acc)
        for total, acc in zip(sums, accs):
            builder.store(builder.fadd(builder.load(total), builder.load(acc)), total)
    b_base, _ = address(context, builder, kinds[5], ba)
    d_base, d_strides = address(context, builder, kinds[9], da)
    d_stride = builder.extract_value(d_strides, 0)
    d_base = builder.add(d_base, builder.add(builder.mul(dr, d_stride), builder.mul(dc, const(4))))
    lo8, hi8 = splat(builder, lo_v, v8), splat(builder, hi_v, v8)
    for h in range(halves):
        at = builder.mul(builder.add(c0, const(8 * h)), const(4))
        bias = builder.load(builder.inttoptr(builder.add(b_base, at), v8.as_pointer()), align=4)
        for i in range(height):
            t = builder.fadd(builder.load(sums[i * halves + h]), bias)
            t = builder.select(builder.fcmp_ordered("<", t, lo8), lo8, t)       # NaN stays NaN, as np.clip
            t = builder.select(builder.fcmp_ordered(">", t, hi8), hi8, t)
            dst = builder.add(d_base, builder.add(builder.mul(const(i), d_stride), const(32 * h)))
            builder.store(t, builder.inttoptr(dst, v8.as_pointer()), align=4)
    return context.get_dummy_value()


_tile, _row = _tile_kernel(MR), _tile_kernel(1)
_half_tile, _half_row = _tile_kernel(MR, 1), _tile_kernel(1, 1)


@Compiled
def gemm_bias_clamp(x, weight, bias, lo, hi, out, chunk, spans):  # pragma: no cover
    """out[m, n] = clamp(sum_k x[m, k] w[k, n] + bias[n], lo, hi) for x [M, K] (rows of im2col columns, or of
    the NHWC input; any strides),
    `weight` from `pack_weight`, `bias` padded to whole blocks; tasks of `chunk` rows times `spans` spans."""
    rows, depth = x.shape
    blocks = weight.shape[0]
    cols = out.shape[1]
    for task in prange((rows + chunk - 1) // chunk * spans):
        m0, count, b0, b1 = task_rows(task, rows, blocks, chunk, spans)
        whole = count // MR
        part = np.empty((MR, NR), np.float32)
        for b in range(b0, b1):
            n0 = b * NR
            if n0 + NR <= cols:
                for t in range(whole):
                    _tile(x, m0 + t * MR, weight, b, depth, bias, n0, lo, hi, out, m0 + t * MR, n0)
                for i in range(whole * MR, count):
                    _row(x, m0 + i, weight, b, depth, bias, n0, lo, hi, out, m0 + i, n0)
                continue
            if n0 + NR // 2 == cols:                 # a last block of 8 columns: its first half only
                for t in range(whole):
                    _half_tile(x, m0 + t * MR, weight, b, depth, bias, n0, lo, hi, out, m0 + t * MR, n0)
                for i in range(whole * MR, count):
                    _half_row(x, m0 + i, weight, b, depth, bias, n0, lo, hi, out, m0 + i, n0)
                continue
            for t in range(whole):                   # another partial last block: through `part`
                _tile(x, m0 + t * MR, weight, b, depth, bias, n0, lo, hi, part, 0, 0)
                for i in range(MR):
                    for j in range(cols - n0):
                        out[m0 + t * MR + i, n0 + j] = part[i, j]
            for i in range(whole * MR, count):
                _row(x, m0 + i, weight, b, depth, bias, n0, lo, hi, part, 0, 0)
                for j in range(cols - n0):
                    out[m0 + i, n0 + j] = part[0, j]


def padded_bias(bias: np.ndarray | None, cols: int) -> np.ndarray:
    """`bias` (zeros when None) in a float32 buffer of whole column blocks (the epilogue loads NR at a time)."""
    padded = np.zeros(-(-cols // NR) * NR, np.float32)
    if bias is not None:
        padded[:cols] = bias
    return padded


def bind(lhs: np.ndarray, packed: np.ndarray, bias: np.ndarray, bounds: tuple[float, float], out: np.ndarray):
    """`gemm_bias_clamp` prebound: out [M, N] = clamp(lhs [M, K] @ weight [K, N] + bias, *bounds), the weight
    and bias as `packing` and `padded_bias` lay them out."""
    rows, depth = lhs.shape
    chunk, spans = tasks(rows, out.shape[1])
    return gemm_bias_clamp.bind(rows * depth * out.shape[1] // 8, lhs, packed, bias, np.float32(bounds[0]),
                                np.float32(bounds[1]), out, chunk, spans)
