"""The compiled form of `lite.kernels.int8.mlas_order` (onnxruntime's unfused QDQ conv): its float32 GEMM in
MLAS's order with true fused multiply-adds, transposed (pixels x weight, so the output is NHWC), then the bias and
QuantizeLinear, all in one kernel.

Register tiles (`_tile_code`, LLVM IR as in `gemm`): `rows` pixels x `vectors` vectors of LANES output channels
held in registers across one block of K, started at zero; per k, the packed weight's vectors are loaded once and
each pixel's x[m, k] is broadcast into a fused multiply-add with them; after the block the tile is written (the
first block) or added to the earlier blocks' sum. Each output is still summed in MLAS's order (only the outputs
run side by side), so nothing is reassociated. The last vector of a tile is stored through a lane mask.
MobileNetV2 QDQ's 10 such convs: 1.8 ms on one core, against 7.1 ms as a numpy dequantize, a column-order
kernel and a transposing QuantizeLinear (load 5.6).
"""
from __future__ import annotations

import functools

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import (
    F32, I32, I64, LANES, WIDE, address, cgutils, intrinsic, ir, njit, prange, splat, types)

VECTORS = 2                  # vectors of columns per tile
ROWS = 12 if WIDE else 6     # rows per tile: 24 accumulators of 32 registers on AVX-512, 12 of 16 else
PANEL = VECTORS * LANES


def _tile_code(rows, vectors, context, builder, signature, args):
    """acc[i, j] = sum_{k0 <= k < k1} x[r + i, k] panels[g, k, j] by fused multiply-adds in k order from zero, for
    i < rows and j < vectors x LANES (the last vector's first `valid` lanes); then t = acc (when `first`) or
    y[r + i, c + j] + acc, c = g x PANEL, kept in y; after the last block (`last`) y = t + bias[c + j] instead,
    quantized into out: clamp(rint(y / scale) + zero_point, lo, hi)."""
    x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last = args
    kinds = signature.args
    vec, byte_vec = ir.VectorType(F32, LANES), ir.VectorType(ir.IntType(8), LANES)
    mask_type = ir.VectorType(ir.IntType(1), LANES)
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    x_base, x_strides = address(context, builder, kinds[0], x)
    x_step = builder.extract_value(x_strides, 0)
    x_rows = [builder.add(x_base, builder.mul(builder.add(r, const(i)), x_step)) for i in range(rows)]
    p_base, p_strides = address(context, builder, kinds[1], panels)
    p_base = builder.add(p_base, builder.mul(g, builder.extract_value(p_strides, 0)))
    c = builder.mul(g, const(PANEL))
    b_base = builder.add(address(context, builder, kinds[2], bias)[0], builder.mul(c, const(4)))
    y_base, y_strides = address(context, builder, kinds[7], y)
    y_step = builder.extract_value(y_strides, 0)
    y_base = builder.add(builder.add(y_base, builder.mul(r, y_step)), builder.mul(c, const(4)))
    o_base, o_strides = address(context, builder, kinds[8], out)
    o_step = builder.extract_value(o_strides, 0)
    o_base = builder.add(builder.add(o_base, builder.mul(r, o_step)), c)
    lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
    mask = builder.icmp_signed("<", lanes, splat(builder, valid, ir.VectorType(I64, LANES)))
    full = ir.Constant(mask_type, [1] * LANES)

    def masked(op, kind, *types_):
        name = "f32" if kind is vec else "i8"
        return cgutils.get_or_insert_function(builder.module, ir.FunctionType(*types_),
                                              f"llvm.masked.{op}.v{LANES}{name}.p0v{LANES}{name}")
    masked_load = masked("load", vec, vec, [vec.as_pointer(), I32, mask_type, vec])
    store_f32 = masked("store", vec, ir.VoidType(), [vec, vec.as_pointer(), I32, mask_type])
    store_i8 = masked("store", byte_vec, ir.VoidType(), [byte_vec, byte_vec.as_pointer(), I32, mask_type])
    vector_fn = lambda name, n: cgutils.get_or_insert_function(                 # noqa: E731
        builder.module, ir.FunctionType(vec, [vec] * n), f"llvm.{name}.v{LANES}f32")
    fma, rint = vector_fn("fma", 3), vector_fn("rint", 1)
    lane_mask = lambda v: mask if v == vectors - 1 else full                # noqa: E731

    accs = [cgutils.alloca_once(builder, vec) for _ in range(rows * vectors)]
    for acc in accs:
        builder.store(ir.Constant(vec, [0.0] * LANES), acc)
    with cgutils.for_range(builder, builder.sub(k1, k0)) as loop:
        k = builder.add(loop.index, k0)
        w_row = builder.add(p_base, builder.mul(k, const(4 * PANEL)))
        ws = [builder.load(builder.inttoptr(builder.add(w_row, const(4 * LANES * v)), vec.as_pointer()), align=4)
              for v in range(vectors)]
        for i in range(rows):
            a = builder.load(builder.inttoptr(builder.add(x_rows[i], builder.mul(k, const(4))), F32.as_pointer()))
            a = splat(builder, a, vec)
            for v in range(vectors):
                acc = accs[i * vectors + v]
                builder.store(builder.call(fma, [a, ws[v], builder.load(acc)]), acc)
    y_at = [[builder.inttoptr(builder.add(builder.add(y_base, builder.mul(const(i), y_step)), const(4 * LANES * v)),
                              vec.as_pointer()) for v in range(vectors)] for i in range(rows)]
    with builder.if_then(builder.icmp_unsigned("==", first, ir.Constant(first.type, 0))):
        for i in range(rows):
            for v in range(vectors):
                acc = accs[i * vectors + v]
                partial = builder.call(masked_load, [y_at[i][v], ir.Constant(I32, 4), lane_mask(v),
                                                     ir.Constant(vec, None)])
                builder.store(builder.fadd(partial, builder.load(acc)), acc)
    with builder.if_else(builder.icmp_unsigned("!=", last, ir.Constant(last.type, 0))) as (quantize, keep):
        with quantize:
            terms = [splat(builder, t, vec) for t in (scale, zero_point, lo, hi)]
            for v in range(vectors):
                b = builder.load(builder.inttoptr(builder.add(b_base, const(4 * LANES * v)), vec.as_pointer()),
                                 align=4)
                for i in range(rows):
                    t = builder.fadd(builder.load(accs[i * vectors + v]), b)
                    builder.call(store_f32, [t, y_at[i][v], ir.Constant(I32, 4), lane_mask(v)])
                    q = builder.fadd(builder.call(rint, [builder.fdiv(t, terms[0])]), terms[1])
                    q = builder.select(builder.fcmp_ordered("<", q, terms[2]), terms[2], q)
                    q = builder.select(builder.fcmp_ordered(">", q, terms[3]), terms[3], q)
                    at = builder.add(builder.add(o_base, builder.mul(const(i), o_step)), const(LANES * v))
                    builder.call(store_i8, [builder.fptosi(q, byte_vec), builder.inttoptr(at, byte_vec.as_pointer()),
                                            ir.Constant(I32, 1), lane_mask(v)])
        with keep:
            for i in range(rows):
                for v in range(vectors):
                    builder.call(store_f32, [builder.load(accs[i * vectors + v]), y_at[i][v], ir.Constant(I32, 4),
                                             lane_mask(v)])
    return context.get_dummy_value()


def _tile_kernel(rows: int, vectors: int):
    @intrinsic
    def tile(typingctx, x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last):
        """One register tile of `rows` x `vectors` over one block of K (`_tile_code`)."""
        return (types.void(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last),
                functools.partial(_tile_code, rows, vectors))
    return tile


_T2, _R2, _T1, _R1 = (_tile_kernel(ROWS if whole else 1, v) for v in (2, 1) for whole in (True, False))


@njit(nogil=True, cache=True)
def tile(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last, vectors,
         whole):  # pragma: no cover
    """The register tile of `vectors` vectors, ROWS rows when `whole`, else one."""
    if vectors == 2 and whole:
        _T2(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last)
    elif vectors == 2:
        _R2(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last)
    elif whole:
        _T1(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last)
    else:
        _R1(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, first, last)


@Compiled
def conv(x, panels, block, bias, scale, zero_point, lo, hi, y, out):  # pragma: no cover
    """out [L, O] = QuantizeLinear(x [L, K] @ w [K, O] + bias) (int8), the float32 sums in MLAS's order: per K
    block of `block`, fused multiply-adds from zero in k order, the block sums added in block order (in y [L, O],
    which ends as the float32 conv). w is packed by `pack_panels`, bias by `pad_bias`; tasks are (panel, tile of
    rows)."""
    rows, depth = x.shape
    cols = out.shape[1]
    groups = panels.shape[0]
    tiles = (rows + ROWS - 1) // ROWS
    for task in prange(groups * tiles):
        g, r0 = task // tiles, task % tiles * ROWS
        width = min(PANEL, cols - g * PANEL)
        vectors = (width + LANES - 1) // LANES
        valid = width - (vectors - 1) * LANES
        whole = r0 + ROWS <= rows
        for r in range(r0, r0 + ROWS if whole else rows, ROWS if whole else 1):
            for k0 in range(0, depth, block):
                k1 = min(depth, k0 + block)
                tile(x, panels, bias, scale, zero_point, lo, hi, y, out, r, g, k0, k1, valid, 1 if k0 == 0 else 0,
                     1 if k1 == depth else 0, vectors, whole)


def pack_panels(weight: np.ndarray) -> np.ndarray:
    """MLAS's A [O, K] (`mlas_order.weight_rows`) as [O / PANEL panels, K, PANEL] columns of w = A^T, zero past O."""
    out_channels, depth = weight.shape
    groups = -(-out_channels // PANEL)
    panels = np.zeros((groups * PANEL, depth), np.float32)
    panels[:out_channels] = weight
    return np.ascontiguousarray(panels.reshape(groups, PANEL, depth).transpose(0, 2, 1))


def pad_bias(bias: np.ndarray | None, out_channels: int) -> np.ndarray:
    """The float32 bias (zero when absent: adding 0 changes no sum's quantization) zero-padded to whole panels."""
    padded = np.zeros(-(-out_channels // PANEL) * PANEL, np.float32)
    if bias is not None:
        padded[:out_channels] = bias
    return padded
