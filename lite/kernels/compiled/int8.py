"""Compiled int8 kernels: the GEMM of Conv2D and FullConnection with the requantization fused (int8 rows [M, K]
times a packed constant weight, written as int8 [M, N] with no float32 product in between; docs/quantization.md,
"Arithmetic"), and one-pass forms of the Add/Mul table gather, of float32 -> integer quantization (either
rounding) and of 8-bit -> float32 dequantization.

Products run in int32 accumulators, 4 bytes of k per lane. Where the host has AVX-512 VNNI and the weights fit
int8, as uint8 x int8 quads: vpdpbusd sums four products into each lane (64 per instruction); int8 rows flip
their sign bit (x + 128, unsigned) and the epilogue subtracts the shift 128 * (column sum of w) again, exactly
(deep EfficientNet-Lite0 GEMMs 1.6-2.6x faster than the pairs, the int8 model 5.96 -> 4.97 ms). Elsewhere as
int16 pairs: for every k-pair the weight holds (w[2k, n], w[2k+1, n]) side by side, each row's (x[2k], x[2k+1])
is broadcast, and `pair sum = x0 w0 + x1 w1` is the multiply-add of 16-bit lanes that x86 AVX2 does in one
instruction (vpmaddwd: 16 products per instruction, twice the float32 FMA rate). The register tile (`MR` rows x
`NR` columns, twelve accumulators of the host's vector width, `llvm.LANES`) is written in LLVM IR (`_tile`),
since numba's loops left the accumulators in memory; the pair multiply-add is the generic IR pattern
(sign-extend, multiply, add even and odd lanes) that LLVM selects as vpmaddwd on x86 and lowers to plain vector
code elsewhere. Exact: the kernel is chosen only when every channel's L1 bound on the sum is below 2^31 (for the
pairs |x| <= 128 and |w| < 2^15; for the quads x + 128 <= 255 plus the shift, `quads_fit`).

The epilogue, in the same IR, is `float_form` (`Requantizer`) on a vector of lanes at a time: t = acc * scale +
offset in float64 (separate multiply and add, as numpy rounds them), lowered by its column's step where below the
threshold (MindSpore Lite's second rounding, `Branch`; a threshold of -inf otherwise), clipped to [0, top],
truncated, plus `lo`, stored as int8; or, where `product32` is set, onnxruntime's rule (`float32_form`):
t = rint(float32(acc) * float32(scale)) + threshold (the bias subtracted from the shift, so in acc; threshold
zp - lo), clipped, plus `lo`. Rows are cut into chunks of whole tiles (and, for short M, the columns into
spans), one chunk per task;
each task first copies its rows (widened to int16, or sign-flipped) into a buffer of its own, zero-filled past
K. Rows past the last whole tile run one at a time (a one-row tile is load-bound at about the same cost per
row); the last block of N stores through a lane mask (EfficientNet-Lite0's 12544 x 32 x 16: 0.18 -> 0.10 ms
against a bounce buffer copied element by element).
"""
from __future__ import annotations

import functools

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.int8.requantize import ONNXRUNTIME
from lite.kernels.compiled.llvm import (
    F64, I8, I16, I32, I64, LANES, VNNI, address, cgutils, intrinsic, ir, njit, prange, splat, types)
from lite.memory_plan import aligned_copy

MR, NR = 6, 2 * LANES                 # register tile: rows x columns (NR int32 lanes = two vectors per row)


def pack_weight(weight: np.ndarray, group: int) -> np.ndarray:
    """[K, N] integer weight as [N/NR blocks, K/group, NR x group]: int8 quads (group 4, for vpdpbusd) or int16
    pairs (group 2); block b, group q holds w[group q + t, b NR + j] at group j + t, zero past K and N (so padded
    rows and columns add nothing). Either way a k-group of one column is 4 bytes: one int32 lane."""
    k, n = weight.shape
    groups, blocks = -(-k // group), -(-n // NR)
    full = np.zeros((group * groups, blocks * NR), np.int8 if group == 4 else np.int16)
    full[:k, :n] = weight
    return aligned_copy(full.reshape(groups, group, blocks, NR).transpose(2, 0, 3, 1).reshape(blocks, groups,
                                                                                             group * NR))


def pad_columns(values: np.ndarray) -> np.ndarray:
    """Per-column parameters padded with zeros to whole tiles (the epilogue loads NR at a time)."""
    padded = np.zeros(-(-len(values) // NR) * NR, values.dtype)
    padded[:len(values)] = values
    return padded


def tile_sums(context, builder, kinds, xa, r, wa, b, p, height: int) -> list:
    """The int32 sums of one register tile, as height x NR/LANES vector accumulators (allocas): rows r.. of the
    k-grouped input `xa` (4 bytes a group) times block b of the packed weight `wa` over p k-groups; `kinds` are
    the intrinsic's argument types, xs first and the weight third."""
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    v8 = ir.VectorType(I32, LANES)
    halves = NR // LANES
    x_base, x_strides = address(context, builder, kinds[0], xa)
    x_stride = builder.extract_value(x_strides, 0)
    x_base = builder.add(x_base, builder.mul(r, x_stride))
    w_base, _ = address(context, builder, kinds[2], wa)
    w_base = builder.add(w_base, builder.mul(b, builder.mul(p, const(4 * NR))))
    accs = [cgutils.alloca_once_value(builder, ir.Constant(v8, None)) for _ in range(height * halves)]
    multiply_add = (_quad_product if kinds[2].dtype == types.int8 else _pair_product)(builder)
    with cgutils.for_range(builder, p) as loop:
        k = loop.index
        w_row = builder.add(w_base, builder.mul(k, const(4 * NR)))
        ws = [builder.load(builder.inttoptr(builder.add(w_row, const(4 * LANES * h)), v8.as_pointer()), align=4)
              for h in range(halves)]
        x_k = builder.add(x_base, builder.mul(k, const(4)))
        for i in range(height):
            group = builder.load(builder.inttoptr(builder.add(x_k, builder.mul(const(i), x_stride)),
                                                  I32.as_pointer()), align=4)
            xv = splat(builder, group, v8)
            for h in range(halves):
                acc = accs[i * halves + h]
                builder.store(multiply_add(builder.load(acc), xv, ws[h]), acc)
    return accs


def _tile_kernel(height: int, partial: bool):
    """The register-tile intrinsic for `height` rows (MR, or 1 for the rows past the last whole tile); `partial`
    tiles store only their first `valid` columns (the last block of N), through a lane mask."""
    @intrinsic
    def tile(typingctx, xs, row, weight, block, groups, shift, scale, offset, step, threshold, product32, col, lo,
             top, out, out_row, valid):
        """out[out_row + i, col + j] = epilogue(sum over the k-groups of xs[row + i] and block `block` of
        `weight`, minus shift) for i < height, j < NR (j < valid if partial), with `shift`/`scale`/`offset`/`step`
        read from column `col`."""
        sig = types.void(xs, row, weight, block, groups, shift, scale, offset, step, threshold, product32, col, lo,
                         top, out, out_row, valid)
        return sig, functools.partial(_tile_code, height, partial)
    return tile


def _tile_code(height, partial, context, builder, signature, args):
    xa, r, wa, b, p, ha, sa, oa, ea, threshold, product32, c0, lo_v, top_v, da, dr, valid = args
    kinds = signature.args
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    v8 = ir.VectorType(I32, LANES)
    halves = NR // LANES
    accs = tile_sums(context, builder, kinds, xa, r, wa, b, p, height)
    d8 = ir.VectorType(F64, LANES)
    h_base, _ = address(context, builder, kinds[5], ha)
    s_base, _ = address(context, builder, kinds[6], sa)
    o_base, _ = address(context, builder, kinds[7], oa)
    e_base, _ = address(context, builder, kinds[8], ea)
    d_base, d_strides = address(context, builder, kinds[14], da)
    d_stride = builder.extract_value(d_strides, 0)
    d_base = builder.add(d_base, builder.add(builder.mul(dr, d_stride), c0))
    zero, top8, lo8 = ir.Constant(d8, [0.0] * LANES), splat(builder, top_v, d8), splat(builder, lo_v, v8)
    below8 = splat(builder, threshold, d8)
    q8, m8 = ir.VectorType(I8, LANES), ir.VectorType(ir.IntType(1), LANES)
    masked_store = cgutils.get_or_insert_function(builder.module, ir.FunctionType(
        ir.VoidType(), [q8, q8.as_pointer(), I32, m8]), f"llvm.masked.store.v{LANES}i8.p0v{LANES}i8")
    lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
    f8 = ir.VectorType(ir.FloatType(), LANES)
    rint = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f8, [f8]), f"llvm.rint.v{LANES}f32")

    def fixed_point(acc, sv, ov, ev):                   # float_form
        t = builder.fadd(builder.fmul(builder.sitofp(acc, d8), sv), ov)
        return builder.select(builder.fcmp_ordered("<", t, below8), builder.fsub(t, ev), t)

    def float32(acc, sv, ov, ev):                       # float32_form: the bias is in the shift, below8 zp - lo
        return builder.fadd(builder.fpext(builder.call(rint, [builder.fmul(builder.sitofp(acc, f8), sv)]), d8),
                            below8)

    with builder.if_else(builder.icmp_signed("!=", product32, ir.Constant(product32.type, 0))) as (onnx, fixed):
        for block, form, scales in ((onnx, float32, lambda sv: builder.fptrunc(sv, f8)),
                                    (fixed, fixed_point, lambda sv: sv)):
            with block:
                _epilogue(builder, form, scales, accs, height, halves, partial, const, c0, s_base, o_base, e_base,
                          h_base, d_base, d_stride, zero, top8, lo8, masked_store, lanes, valid)
    return context.get_dummy_value()


def _epilogue(builder, form, scales, accs, height, halves, partial, const, c0, s_base, o_base, e_base, h_base, d_base,
              d_stride, zero, top8, lo8, masked_store, lanes, valid) -> None:
    """The stores of one register tile: t = form(acc - shift, scales(scale), offset, step) clipped to [0, top],
    truncated, plus lo."""
    v8, d8, q8 = (ir.VectorType(t, LANES) for t in (I32, F64, I8))
    for h in range(halves):
        at = builder.mul(builder.add(c0, const(LANES * h)), const(8))
        sv = builder.load(builder.inttoptr(builder.add(s_base, at), d8.as_pointer()), align=8)
        sv = scales(sv)
        ov = builder.load(builder.inttoptr(builder.add(o_base, at), d8.as_pointer()), align=8)
        ev = builder.load(builder.inttoptr(builder.add(e_base, at), d8.as_pointer()), align=8)
        hv = builder.load(builder.inttoptr(builder.add(h_base, builder.mul(builder.add(c0, const(LANES * h)),
                                                                           const(4))), v8.as_pointer()), align=4)
        for i in range(height):
            t = form(builder.sub(builder.load(accs[i * halves + h]), hv), sv, ov, ev)
            t = builder.select(builder.fcmp_ordered("<", t, zero), zero, t)
            t = builder.select(builder.fcmp_ordered(">", t, top8), top8, t)
            q = builder.trunc(builder.add(builder.fptosi(t, v8), lo8), q8)
            dst = builder.inttoptr(builder.add(d_base, builder.add(builder.mul(const(i), d_stride),
                                                                   const(LANES * h))), q8.as_pointer())
            if partial:
                column = builder.add(lanes, splat(builder, const(LANES * h), lanes.type))
                mask = builder.icmp_signed("<", column, splat(builder, valid, lanes.type))
                builder.call(masked_store, [q, dst, ir.Constant(I32, 1), mask])
            else:
                builder.store(q, dst, align=1)


def _pair_product(builder):
    """acc + the int16-pair sums x0 w0 + x1 w1 per lane, as the generic IR pattern (sign-extend, multiply, add
    even and odd lanes) that LLVM selects as vpmaddwd (or vpdpwssd) on x86."""
    v8, v16, w16 = ir.VectorType(I32, LANES), ir.VectorType(I16, 2 * LANES), ir.VectorType(I32, 2 * LANES)
    even, odd = (ir.Constant(v8, [2 * t + s for t in range(LANES)]) for s in (0, 1))

    def multiply_add(acc, xv, wv):
        prod = builder.mul(builder.sext(builder.bitcast(xv, v16), w16), builder.sext(builder.bitcast(wv, v16), w16))
        return builder.add(acc, builder.add(builder.shuffle_vector(prod, prod, even),
                                            builder.shuffle_vector(prod, prod, odd)))
    return multiply_add


def _quad_product(builder):
    """acc + the sums of four uint8 x int8 products per lane: vpdpbusd (x the unsigned operand)."""
    v8 = ir.VectorType(I32, LANES)
    dot = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v8, [v8] * 3), "llvm.x86.avx512.vpdpbusd.512")
    return lambda acc, xv, wv: builder.call(dot, [acc, xv, wv])


_tile, _row, _tile_part, _row_part = (_tile_kernel(h, p) for p in (False, True) for h in (MR, 1))


@Compiled
def gemm_requantize(x, weight, flip, shift, scale, offset, step, threshold, product32, lo, top, out, chunk,
                    spans):  # pragma: no cover
    """out[m, n] = clip(trunc(t), 0, top) + lo, t = acc * scale[n] + offset[n] (less step[n] where below
    `threshold`; with `product32`, t = rint(float32(acc) * float32(scale[n])) + threshold),
    acc = sum_k (x[m, k] ^ flip) w[k, n] - shift[n], for x [M, K], `weight` from `pack_weight`, tasks of `chunk`
    rows times `spans` column spans."""
    rows, depth = x.shape
    blocks, groups, width = weight.shape
    cols = out.shape[1]
    for task in prange(task_count(rows, chunk, spans)):
        m0, count, whole, b0, b1 = task_tiles(task, rows, blocks, chunk, spans)
        xs = np.zeros((count, width // NR * groups), weight.dtype)
        for i in range(count):
            for k in range(depth):
                xs[i, k] = x[m0 + i, k] ^ flip
        for b in range(b0, b1):
            n0 = b * NR
            valid = min(NR, cols - n0)
            if valid == NR:
                for t in range(whole):
                    _tile(xs, t * MR, weight, b, groups, shift, scale, offset, step, threshold, product32, n0, lo,
                          top, out, m0 + t * MR, valid)
                for i in range(whole * MR, count):
                    _row(xs, i, weight, b, groups, shift, scale, offset, step, threshold, product32, n0, lo, top,
                         out, m0 + i, valid)
            else:                                    # the last, partial column block
                for t in range(whole):
                    _tile_part(xs, t * MR, weight, b, groups, shift, scale, offset, step, threshold, product32, n0,
                               lo, top, out, m0 + t * MR, valid)
                for i in range(whole * MR, count):
                    _row_part(xs, i, weight, b, groups, shift, scale, offset, step, threshold, product32, n0, lo,
                              top, out, m0 + i, valid)


@njit(nogil=True, cache=True, inline="always")
def task_count(rows, chunk, spans):  # pragma: no cover
    """How many tasks `tasks`' split makes: chunks of `chunk` rows times `spans` column spans."""
    return (rows + chunk - 1) // chunk * spans


@njit(nogil=True, cache=True, inline="always")
def task_tiles(task, rows, blocks, chunk, spans):  # pragma: no cover
    """Task `task`'s share of an [M rows, `blocks` column blocks] product: (first row, rows, whole MR-row tiles
    among them, first block, end block)."""
    per_span = (blocks + spans - 1) // spans
    m0, b0 = task // spans * chunk, task % spans * per_span
    count = min(chunk, rows - m0)
    return m0, count, count // MR, b0, min(blocks, b0 + per_span)


def tasks(rows: int, cols: int) -> tuple[int, int]:
    """(rows per task, column spans) for `gemm_requantize`: chunks of about 8 tiles (the rows of one stay in L1
    beside a weight block), and for short M the columns cut too, so that there are at least 8 tasks."""
    chunks = max(1, -(-rows // (8 * MR)))
    chunk = -(-(-(-rows // chunks)) // MR) * MR
    spans = max(1, min(-(-cols // NR), -(-8 // chunks)))
    return chunk, spans


def quads_fit(weight: np.ndarray) -> bool:
    """Whether vpdpbusd's quads are exact for this [K, N] weight: int8 weights, and every column's sum of
    |w| times 256 (x + 128 <= 255, plus the shift that removes the 128) within int32."""
    return (VNNI and int(weight.min(initial=0)) >= -128 and int(weight.max(initial=0)) <= 127
            and 256 * int(np.abs(weight.astype(np.int64)).sum(axis=0).max(initial=0)) < 1 << 31)


def bind(lhs: np.ndarray, weight: np.ndarray, requantize, out: np.ndarray):
    """`gemm_requantize` prebound: out [M, N] = requantize(lhs [M, K] @ weight [K, N]) with `requantize`'s
    float form (a `Requantizer` with exact float parameters, per channel along N or one for all; with or
    without MindSpore Lite's branch), or onnxruntime's float32 rule. With VNNI
    and int8 weights the products run as uint8 quads: int8 rows flip their sign bit (x + 128), and the shift
    128 * (column sum of w) takes that back out, exactly, before the float epilogue."""
    rows, depth = lhs.shape
    scale, offset, lo, top = requantize.per_channel(out.shape[1])
    step, threshold = requantize.lowering(out.shape[1])
    chunk, spans = tasks(rows, out.shape[1])
    quads = quads_fit(weight)
    flip = -128 if quads and lhs.dtype == np.int8 else 0
    shift = -flip * weight.astype(np.int64).sum(axis=0)
    product32 = requantize.rounding == ONNXRUNTIME
    if product32:              # the int32 bias joins the sums (wrapping as onnxruntime's int32 sum does)
        threshold = np.float64(requantize.zero_point - lo)
        shift = shift - offset.astype(np.int64)
    return gemm_requantize.bind(rows * depth * out.shape[1] // 4, lhs, pack_weight(weight, 4 if quads else 2),
                                lhs.dtype.type(flip), pad_columns(shift.astype(np.int32)), pad_columns(scale),
                                pad_columns(offset), pad_columns(step), threshold, np.int32(product32),
                                np.int32(lo), top, out, chunk, spans)


@Compiled
def pair_table(a, b, table, out):  # pragma: no cover
    """out[i] = table[256 * byte(a[i]) + byte(b[i])] over flat int8 arrays: the int8 Add/Mul gather in one pass."""
    for i in prange(len(out)):
        out[i] = table[(np.int32(a[i]) & 255) << 8 | (np.int32(b[i]) & 255)]


@Compiled
def quantize(x, scale, zero_point, lo, hi, out):  # pragma: no cover
    """out = clamp(rint(x / scale) + zp, lo, hi) over flat float32 x with one float32 scale and zero point, in
    `quant_cast.quantize`'s float32 steps (rint halves to even; NaN becomes lo, as fmax gives)."""
    for i in prange(len(out)):
        q = np.rint(x[i] / scale) + zero_point
        if not q >= lo:
            q = lo
        elif q > hi:
            q = hi
        out[i] = np.int32(q)


@Compiled
def quantize_away(x, inverse, zero_point, lo, hi, out):  # pragma: no cover
    """out = clamp(round(x * inverse + zp), lo, hi), half away from zero, over flat float32 x with one float32
    inverse scale and zero point: `quant_cast.quantize_nnacl`'s float32 steps (NaN becomes lo)."""
    for i in prange(len(out)):
        q = x[i] * inverse + zero_point
        r = np.floor(np.abs(q) + np.float32(0.5))
        if q < 0:
            r = -r
        if not r >= lo:
            r = lo
        elif r > hi:
            r = hi
        out[i] = np.int32(r)


@Compiled
def dequantize(q, scale, zero_point, out):  # pragma: no cover
    """out = (q - zp) * scale in float32 over flat integer q with one float32 scale and zero point:
    `quant_cast.dequantize`'s float32 steps."""
    for i in prange(len(out)):
        out[i] = (np.float32(q[i]) - zero_point) * scale
