"""The compiled GEMM of dynamic quantization (`int8/dynamic_matmul.py`): float32 rows [M, K] quantized per row to
uint8 at run time, times a packed constant int8 weight, written as float32 [M, N] with the row and column scales
and the bias applied as the int32 sums leave the registers.

One threaded pass quantizes every row (DynamicQuantizeLinear's float32 steps over the row: its range, scale and
zero point) into a uint8 matrix zero-filled past K; then the register tiles of `int8` multiply: with AVX-512
VNNI as uint8 x int8 quads (vpdpbusd, the uint8 rows need no sign flip), elsewhere as int16 pairs (vpmaddwd).
The epilogue, in the same IR, subtracts the zero point's share z[m] * (column sum of w) from each sum, converts it
to float32 and computes acc * (s[m] * s_w[n]) + b[n] in the numpy kernel's float32 order, so both backends give
the same bits. A task's rows past its last whole tile run as tiles of 4, 2 and 1 rows (a one-row tile is
load-bound: a sentence's 32 tokens are 5 tiles and 2 rows). A fused residual sum and GELU (a transformer's
projections and its feed-forward's first layer) follow per task over the block it has just written, still in
cache, instead of a pass over the whole output each; the GELU is a rational function (`gelu_rational`), not
erfc's exp and polynomial (MiniLM's 512 x 1536 feed-forward 0.72 -> 0.25 ms of GELU). Exact: |acc| <= K * 255 *
127 stays within int32 for K below 66,000 (`fits`).
"""
from __future__ import annotations

import functools

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.int8 import (
    MR, NR, pack_weight, pad_columns, quads_fit, task_count, task_tiles, tasks, tile_sums)
from lite.kernels.compiled.llvm import F32, I32, I64, LANES, address, cgutils, intrinsic, ir, njit, prange, splat, types
from lite.kernels.compiled.vector_reduce import muladd, row_range

LEVELS = 255
MAX_DEPTH = ((1 << 31) - 1) // (LEVELS * 127)      # K from which an int32 sum could overflow
F = np.float32
# Phi(v) - 1/2 = v P(v^2) / Q(v^2) on |v| <= 4 sqrt(2) (erf(4) = 1 - 1.5e-8 beyond): a rational fit of this module's
# own (weighted least squares, iterated towards minimax), within 3.4e-7 of erf / 2 when evaluated in float32.
P0, P1, P2, P3, P4, P5 = (F(c) for c in (0.3989422023296356, 0.03469186648726463, 0.00472587626427412,
                                         0.00017693362315185368, 6.3648171817476396e-06, 2.181910296883416e-08))
Q1, Q2, Q3, Q4, Q5 = (F(c) for c in (0.25362518429756165, 0.02911888249218464, 0.0019305291352793574,
                                     7.602098776260391e-05, 1.1712756986526074e-06))
GELU_CLAMP, HALF, ONE = F(4.0 * np.sqrt(2.0)), F(0.5), F(1.0)


def _tile_kernel(height: int, partial: bool):
    """The register tile for `height` rows (MR, or 1 for the rows past the last whole tile); `partial` tiles
    store only their first `valid` columns (the last block of N), through a lane mask."""
    @intrinsic
    def tile(typingctx, xs, row, weight, block, groups, zero, row_scale, col_sum, col_scale, bias, col, out, valid):
        """out[row + i, col + j] = float32(sum over the k-groups of xs[row + i] and block `block` of `weight`
        - zero[row + i] * col_sum[col + j]) * (row_scale[row + i] * col_scale[col + j]) + bias[col + j]."""
        sig = types.void(xs, row, weight, block, groups, zero, row_scale, col_sum, col_scale, bias, col, out, valid)
        return sig, functools.partial(_tile_code, height, partial)
    return tile


def _tile_code(height, partial, context, builder, signature, args):
    xa, r, wa, b, p, za, rsa, csa, wsa, ba, c0, da, valid = args
    kinds = signature.args
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    v8, f8 = ir.VectorType(I32, LANES), ir.VectorType(F32, LANES)
    halves = NR // LANES
    accs = tile_sums(context, builder, kinds, xa, r, wa, b, p, height)

    def vector_at(array, column, kind):
        base, _ = address(context, builder, kinds[array], args[array])
        return builder.load(builder.inttoptr(builder.add(base, builder.mul(column, const(4))), kind.as_pointer()),
                            align=4)

    def scalar_at(array, index, kind):
        base, _ = address(context, builder, kinds[array], args[array])
        return builder.load(builder.inttoptr(builder.add(base, builder.mul(index, const(4))), kind.as_pointer()))

    d_base, d_strides = address(context, builder, kinds[11], da)
    d_stride = builder.extract_value(d_strides, 0)
    d_base = builder.add(d_base, builder.add(builder.mul(r, d_stride), builder.mul(c0, const(4))))
    masked_store = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
        ir.VoidType(), [f8, f8.as_pointer(), I32, ir.VectorType(ir.IntType(1), LANES)]),
        f"llvm.masked.store.v{LANES}f32.p0v{LANES}f32")
    lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
    rows = [(splat(builder, scalar_at(5, builder.add(r, const(i)), I32), v8),
             splat(builder, scalar_at(6, builder.add(r, const(i)), F32), f8)) for i in range(height)]
    for h in range(halves):
        column = builder.add(c0, const(LANES * h))
        sums, scales, bias = vector_at(7, column, v8), vector_at(8, column, f8), vector_at(9, column, f8)
        for i, (zero, row_scale) in enumerate(rows):
            acc = builder.sub(builder.load(accs[i * halves + h]), builder.mul(zero, sums))
            t = builder.fadd(builder.fmul(builder.sitofp(acc, f8), builder.fmul(row_scale, scales)), bias)
            dst = builder.inttoptr(builder.add(d_base, builder.add(builder.mul(const(i), d_stride),
                                                                   const(4 * LANES * h))), f8.as_pointer())
            if partial:
                mask = builder.icmp_signed("<", builder.add(lanes, splat(builder, const(LANES * h), lanes.type)),
                                           splat(builder, valid, lanes.type))
                builder.call(masked_store, [t, dst, ir.Constant(I32, 4), mask])
            else:
                builder.store(t, dst, align=4)
    return context.get_dummy_value()


_tile, _tile4, _tile2, _row, _tile_part, _tile4_part, _tile2_part, _row_part = (
    _tile_kernel(h, p) for p in (False, True) for h in (MR, 4, 2, 1))


@njit(nogil=True, cache=True, inline="always")
def gelu_rational(v):  # pragma: no cover
    """v Phi(v) in float32 from one rational function: 11 multiply-adds and a division, no exp or branch, so it
    vectorises (3x `gelu.gelu32`'s speed); within 2.4e-7 max(1, |v|) of GELU, against its ~1.2e-7. The output it
    feeds is quantized to 255 levels again by the next product."""
    c = min(max(v, -GELU_CLAMP), GELU_CLAMP)
    t = c * c
    p = muladd(muladd(muladd(muladd(muladd(P5, t, P4), t, P3), t, P2), t, P1), t, P0)
    q = muladd(muladd(muladd(muladd(muladd(Q5, t, Q4), t, Q3), t, Q2), t, Q1), t, ONE)
    return v * max(muladd(c, p / q, HALF), np.float32(0.0))     # Phi >= 0: GELU(-inf) is NaN, not +inf


@njit(nogil=True, cache=True, error_model="numpy")
def _finish(out, residual, gelu, m0, m1, n0, n1):  # pragma: no cover
    """out[m0:m1, n0:n1] += residual (unless it has no rows), then GELU where `gelu`. Over row slices indexed
    from 0: an index from n0 might be negative to numba, whose wrap-around test keeps the loop from vectorising
    (GELU 12x slower)."""
    for i in range(m0, m1):
        row = out[i, n0:n1]
        if residual.shape[0]:
            add = residual[i, n0:n1]
            for n in range(len(row)):
                row[n] += add[n]
        if gelu:
            for n in range(len(row)):
                row[n] = gelu_rational(row[n])


@Compiled
def dynamic_gemm(x, xs, zero, row_scale, weight, col_sum, col_scale, bias, out, residual, gelu, chunk, spans,
                 per_row):  # pragma: no cover
    """out = the dynamic product of float32 x [M, K] and `weight` (`pack_weight`'s int8 quads or int16 pairs),
    each row quantized with its own range (`per_row`) or all with the range of x (DynamicQuantizeLSTM's X),
    plus `residual` [M, N] unless it has no rows, then GELU where `gelu`: each task finishes its own block while
    it is in cache. xs [M, >= K] (the weight's integer type), zero and row_scale [M] are work buffers the first
    pass fills."""
    rows, depth = x.shape
    all_low, all_high = np.float32(0.0), np.float32(0.0)
    if not per_row:
        for m in range(rows):
            low, high = row_range(x[m])
            all_low, all_high = min(all_low, low), max(all_high, high)
    for m in prange(rows):
        row, dst = x[m], xs[m]
        low, high = row_range(row) if per_row else (all_low, all_high)
        scale = (high - low) / np.float32(LEVELS) if high != low else np.float32(1.0) / np.float32(LEVELS)
        z = -low / scale
        if z > np.float32(LEVELS):
            z = np.float32(LEVELS)
        z = np.rint(z)
        for k in range(depth):
            dst[k] = np.int32(min(max(np.rint(row[k] / scale) + z, np.float32(0.0)), np.float32(LEVELS)))
        dst[depth:] = 0
        zero[m] = np.int32(z)
        row_scale[m] = scale
    blocks, groups, width = weight.shape
    cols = out.shape[1]
    for task in prange(task_count(rows, chunk, spans)):
        m0, count, whole, b0, b1 = task_tiles(task, rows, blocks, chunk, spans)
        rest = m0 + whole * MR
        for b in range(b0, b1):
            n0 = b * NR
            valid = min(NR, cols - n0)
            if valid == NR:
                for t in range(whole):
                    _tile(xs, m0 + t * MR, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out,
                          valid)
                i = rest
                if m0 + count - i >= 4:
                    _tile4(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out, valid)
                    i += 4
                if m0 + count - i >= 2:
                    _tile2(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out, valid)
                    i += 2
                if i < m0 + count:
                    _row(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out, valid)
            else:                                    # the last, partial column block
                for t in range(whole):
                    _tile_part(xs, m0 + t * MR, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0,
                               out, valid)
                i = rest
                if m0 + count - i >= 4:
                    _tile4_part(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out,
                                valid)
                    i += 4
                if m0 + count - i >= 2:
                    _tile2_part(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out,
                                valid)
                    i += 2
                if i < m0 + count:
                    _row_part(xs, i, weight, b, groups, zero, row_scale, col_sum, col_scale, bias, n0, out, valid)
        if residual.shape[0] or gelu:
            _finish(out, residual, gelu, m0, m0 + count, b0 * NR, min(cols, b1 * NR))


def fits(depth: int) -> bool:
    """Whether every sum of a depth-K row fits int32."""
    return depth <= MAX_DEPTH


def quantized_rows(weight_t: np.ndarray) -> tuple[np.dtype, int]:
    """(dtype, width) of the quantized-rows buffer for a [K, N] int8 weight: uint8 quads where VNNI runs them,
    else int16 pairs; K padded to whole groups."""
    group = 4 if quads_fit(weight_t) else 2
    return np.dtype(np.uint8 if group == 4 else np.int16), -(-weight_t.shape[0] // group) * group


def bind(x: np.ndarray, weight_t: np.ndarray, col_scale: np.ndarray, bias: np.ndarray | None, out: np.ndarray,
         xs: np.ndarray, zero: np.ndarray, row_scale: np.ndarray, residual: np.ndarray | None = None,
         gelu: bool = False):
    """`dynamic_gemm` prebound: out [M, N] = dynamic product of x [M, K] (each row its own range) and the int8
    weight_t [K, N] with per-column scales `col_scale` and bias, then + residual [M, N] and GELU when given;
    xs (`quantized_rows`), zero and row_scale [M] are its work."""
    rows, depth = x.shape
    columns = out.shape[1]
    chunk, spans = tasks(rows, columns)
    return dynamic_gemm.bind(rows * depth * columns // 4, x, xs, zero, row_scale, *packed(weight_t, xs.dtype),
                             *columns_of(col_scale, bias), out, *epilogue(residual, gelu), chunk, spans,
                             np.bool_(True))


def epilogue(residual: np.ndarray | None = None, gelu: bool = False) -> tuple[np.ndarray, np.bool_]:
    """`dynamic_gemm`'s residual and gelu arguments: a residual [M, N] (no rows: none) and the GELU flag."""
    return (np.zeros((0, 0), np.float32) if residual is None else residual), np.bool_(gelu)


def packed(weight_t: np.ndarray, rows_type: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The [K, N] int8 weight as the tiles read it beside rows of `rows_type` (`quantized_rows`), and its column
    sums (for the zero points), padded to whole tiles."""
    group = 4 if rows_type == np.uint8 else 2
    return pack_weight(weight_t, group), pad_columns(weight_t.astype(np.int64).sum(axis=0).astype(np.int32))


def columns_of(col_scale: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-column scales and bias (zeros when None) as float32, padded to whole tiles."""
    bias = np.zeros(len(col_scale), np.float32) if bias is None else bias
    return pad_columns(col_scale.astype(np.float32)), pad_columns(bias.astype(np.float32))
