"""Compiled direct convolution (depthwise, and dense first layers; float32 and int8), the fused bias/clamp
epilogue and int8 requantization.

NHWC activations; depthwise weights as [KH, KW, C_out] (C_out = C_in x multiplier, output channel o reads input
channel o // multiplier). Padding is never copied: taps outside the input are skipped (float: they add zero;
int8: they read the zero point, whose contribution is the constant `zsum`). Work is split over (image, output
row) pairs across the threads.

Register tiles (`conv_tiled`; output channels a multiple of 8): 4 output pixels x two vectors of output channels
(`llvm.LANES` each: 32 channels on AVX-512, 16 elsewhere; then one vector, then 8 channels) held in accumulators
across all taps of a row's tap list, the weights of a tap loaded once for the 4 pixels;
a depthwise tap (channel multiplier 1) multiplies a vector of input channels, a dense tap (a first layer's
kernel position and input channel, w as [KH, KW, C, O]) one input value broadcast over the outputs. Written in
LLVM IR (`_tile_code`) since numba's loops kept the sums in memory: 2.0x the per-element kernel on MobileNetV2's
depthwise layers on one core (17-20 against 7-9 GMAC/s). Float32 sums are fused multiply-adds, so they agree
with the numpy kernel within float32 rounding. int8 runs the same tiles on its input rows centred (x - zp) into
float32 (per output row, in cache), exact while every channel's sum of |x - zp| |w| stays below 2^24 (checked
when it binds), and requantizes as `float_form` does (given a float32 scale, as onnxruntime's `float32_form`,
the bias then in the initial sums): bit for bit the integer result, 1.3-2x the int32 kernel.
The generic kernels (`depthwise_f32`, `depthwise_i8`) take every other shape, each float32 sum in the numpy
kernel's order.

Fused activations that are clamps (none, RELU, RELU6, HARD_TANH) are `lo`/`hi` bounds; a comparison leaves NaN
alone, as `np.clip` does.
"""
from __future__ import annotations

import functools

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import (
    F32, F64, I8, I32, I64, LANES, address, cgutils, intrinsic, ir, njit, prange, splat, types)

TILE_PIXELS = 4
EXACT_SUM = 1 << 24       # int8 tiles: integer sums below this are exact in float32


def _vector(builder, address, vector):
    return builder.inttoptr(address, vector.as_pointer())


def _tile_code(dense, int8, product32, pixels, vectors, lanes, context, builder, signature, args):
    """out[o_at + p o_step + lanes v + l] = epilogue(acc) for p < pixels, v < vectors, lanes l, where acc =
    init[param + lanes v + l] + sum_t x[x_at + p x_step + tap_x[t] (+ lanes v + l unless dense)]
    w[tap_w[t] + lanes v + l] (float32, addresses in elements): depthwise reads a vector of channels per tap,
    dense one input value for all output channels. float32 out: epilogue clamp(acc, lo, hi). int8 out:
    clip(trunc(t), 0, hi) + lo, t = acc scale + offset with per-channel float64 scale and offset, or with
    `product32` (a float32 scale: onnxruntime's rule) t = rint(acc scale) + offset, the product in float32."""
    xa, x_at, x_step, wa, w_at, txa, twa, taps, ia, sa, fa, param, lo, hi, oa, o_at, o_step = args
    kinds = signature.args[:4] + signature.args[5:]
    vec, dvec = ir.VectorType(F32, lanes), ir.VectorType(F64, lanes)
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    addr = lambda k, a: address(context, builder, kinds[k], a)[0]          # noqa: E731
    load = lambda address, vector, align: builder.load(_vector(builder, address, vector), align=align)  # noqa: E731
    i32s, i8s = ir.VectorType(I32, lanes), ir.VectorType(I8, lanes)
    x0 = builder.add(addr(0, xa), builder.mul(x_at, const(4)))
    w0 = builder.add(addr(3, wa), builder.mul(w_at, const(4)))
    tx, tw = (builder.inttoptr(addr(k, a), I64.as_pointer()) for k, a in ((4, txa), (5, twa)))
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{lanes}f32")
    p4, p8 = builder.mul(param, const(4)), builder.mul(param, const(8))
    inits = [load(builder.add(addr(7, ia), builder.add(p4, const(4 * lanes * v))), vec, 4) for v in range(vectors)]
    accs = [cgutils.alloca_once_value(builder, inits[v]) for _ in range(pixels) for v in range(vectors)]
    step = builder.mul(x_step, const(4))
    with cgutils.for_range(builder, taps) as loop:
        xt = builder.add(x0, builder.mul(builder.load(builder.gep(tx, [loop.index])), const(4)))
        wt = builder.add(w0, builder.mul(builder.load(builder.gep(tw, [loop.index])), const(4)))
        ws = [load(builder.add(wt, const(4 * lanes * v)), vec, 4) for v in range(vectors)]
        for p in range(pixels):
            xp = builder.add(xt, builder.mul(const(p), step))
            if dense:
                xv = splat(builder, builder.load(builder.inttoptr(xp, F32.as_pointer()), align=4), vec)
            for v in range(vectors):
                acc = accs[p * vectors + v]
                if not dense:
                    xv = load(builder.add(xp, const(4 * lanes * v)), vec, 4)
                builder.store(builder.call(fma, [xv, ws[v], builder.load(acc)]), acc)
    o0 = builder.add(addr(13, oa), builder.mul(o_at, const(1 if int8 else 4)))
    zero = ir.Constant(dvec if int8 else vec, [0.0] * lanes)
    low, high = (splat(builder, lo, i32s), splat(builder, hi, dvec)) if int8 else (splat(builder, lo, vec),
                                                                                   splat(builder, hi, vec))
    rint = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec]), f"llvm.rint.v{lanes}f32")
    for v in range(vectors):
        if int8:
            offset = load(builder.add(addr(9, fa), builder.add(p8, const(8 * lanes * v))), dvec, 8)
            scale = (load(builder.add(addr(8, sa), builder.add(p4, const(4 * lanes * v))), vec, 4) if product32
                     else load(builder.add(addr(8, sa), builder.add(p8, const(8 * lanes * v))), dvec, 8))
        for p in range(pixels):
            r = builder.load(accs[p * vectors + v])
            at = builder.add(builder.mul(const(p), o_step), const(lanes * v))
            if int8:
                t = (builder.fpext(builder.call(rint, [builder.fmul(r, scale)]), dvec) if product32
                     else builder.fmul(builder.fpext(r, dvec), scale))
                t = builder.fadd(t, offset)
                t = builder.select(builder.fcmp_ordered("<", t, zero), zero, t)
                t = builder.select(builder.fcmp_ordered(">", t, high), high, t)
                q = builder.trunc(builder.add(builder.fptosi(t, i32s), low), i8s)
                builder.store(q, _vector(builder, builder.add(o0, at), i8s), align=1)
            else:
                r = builder.select(builder.fcmp_ordered("<", r, low), low, r)
                r = builder.select(builder.fcmp_ordered(">", r, high), high, r)
                builder.store(r, _vector(builder, builder.add(o0, builder.mul(at, const(4))), vec), align=4)
    return context.get_dummy_value()


def _tile_kernel(pixels: int, vectors: int, lanes: int):
    @intrinsic
    def tile(typingctx, x, x_at, x_step, w, w_at, tap_x, tap_w, taps, init, scale, offset, param, lo, hi, out,
             o_at, o_step):
        """One register tile (`_tile_code`): dense when w is [KH, KW, C, O], requantized when `out` is int8, by
        onnxruntime's rule when `scale` is float32 (float32 ignores scale and offset)."""
        sig = types.void(x, x_at, x_step, w, w_at, tap_x, tap_w, taps, init, scale, offset, param, lo, hi, out,
                         o_at, o_step)
        return sig, functools.partial(_tile_code, w.ndim == 4, out.dtype == types.int8,
                                      scale.dtype == types.float32, pixels, vectors, lanes)
    return tile


# channel blocks, widest first: two vectors, one vector, and (on AVX-512) one 8-lane vector; each as a tile of
# TILE_PIXELS pixels and as a one-pixel tile. Float depthwise convs end the channels that are no multiple of 8 in
# blocks of 4, 2 and 1 (`_tail`: BlazeFace's 28, 36 and 42 channels ran on `depthwise_f32` at 5-7 GMAC/s)
BLOCKS = (2 * LANES, LANES, 8)
_TILE_A, _PIXEL_A, _TILE_B, _PIXEL_B, _TILE_C, _PIXEL_C, _TILE_D, _PIXEL_D, _TILE_E, _PIXEL_E, _TILE_F, _PIXEL_F = (
    _tile_kernel(pixels, vectors, lanes) for vectors, lanes in ((2, LANES), (1, LANES), (1, 8), (1, 4), (1, 2), (1, 1))
    for pixels in (TILE_PIXELS, 1))


@njit(nogil=True, cache=True)
def _tail(xf, xat, x_step, w, tap_x, tap_w, taps, init, lo, hi, of, at, o_step, pixels, c0, o):  # pragma: no cover
    """Float depthwise channels c0..o-1 (fewer than 8) of `pixels` output pixels, the first at input element xat
    and output element at, the next x_step and o_step further: 4, 2 and 1 channels at a time, TILE_PIXELS pixels
    at a time (then one)."""
    while c0 < o:
        width = 4 if o - c0 >= 4 else 2 if o - c0 >= 2 else 1
        p = 0
        while p < pixels:
            whole = p + TILE_PIXELS <= pixels
            xa, oa = xat + p * x_step + c0, at + p * o_step + c0
            if width == 4 and whole:
                _TILE_D(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            elif width == 4:
                _PIXEL_D(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            elif width == 2 and whole:
                _TILE_E(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            elif width == 2:
                _PIXEL_E(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            elif whole:
                _TILE_F(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            else:
                _PIXEL_F(xf, xa, x_step, w, c0, tap_x, tap_w, taps, init, init, init, c0, lo, hi, of, oa, o_step)
            p += TILE_PIXELS if whole else 1
        c0 += width


@Compiled
def conv_tiled(x, centre, xc, zp, w, init, scale, offset, lo, hi, out, stride_h, stride_w, dil_h, dil_w,
               pad_top, pad_left):  # pragma: no cover
    """Register-tile convolution (O % 8 == 0 but for float depthwise): depthwise (channel multiplier 1, w [KH, KW, C]) or dense
    (w [KH, KW, C, O]). The tiles read float32: `xc` (x itself), or, when `centre` (int8 x), each task's input
    rows centred (x - zp) into a buffer of its own, which stays in cache. Per output row: the list of its taps
    (kernel row and column, and for dense the input channel) inside the input rows; pixels whose every tap
    lies inside the row run as tiles of 4, 16 (then 8) output channels at a time; the few edge pixels run as
    1-pixel tiles over their own list of taps."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    _, oh, ow, o = out.shape
    dense = w.ndim == 4
    cin = c if dense else 1                      # taps per kernel position
    xs, of = x.reshape(-1), out.reshape(-1)
    first = min(ow, (pad_left + stride_w - 1) // stride_w)           # interior output columns [first, last)
    last = max(first, min(ow, (wd - 1 + pad_left - (kw - 1) * dil_w) // stride_w + 1))
    span = wd * c
    for task in prange(n * oh):
        image, y = task // oh, task % oh
        tap_x = np.empty(kh * kw * cin, np.int64)
        tap_w = np.empty(kh * kw * cin, np.int64)
        tap_j = np.empty(kh * kw * cin, np.int64)
        edge_x = np.empty(kh * kw * cin, np.int64)
        edge_w = np.empty(kh * kw * cin, np.int64)
        xf = np.empty(kh * span, np.float32) if centre else xc.reshape(-1)
        taps = rows = 0
        for i in range(kh):
            iy = y * stride_h - pad_top + i * dil_h
            if 0 <= iy < h:
                start = (image * h + iy) * span
                if centre:
                    src, dst = xs[start:start + span], xf[rows * span:(rows + 1) * span]
                    for k in range(span):
                        dst[k] = np.float32(src[k]) - np.float32(zp)
                    start = rows * span
                rows += 1
                for j in range(kw):
                    for ci in range(cin):
                        tap_x[taps] = start + (j * dil_w - pad_left) * c + ci
                        tap_w[taps] = ((i * kw + j) * cin + ci) * o
                        tap_j[taps] = j
                        taps += 1
        row, step = task * ow * o, stride_w * c
        for e in range(first + ow - last):
            xo = e if e < first else last + e - first
            count = 0
            for t in range(taps):
                ix = xo * stride_w - pad_left + tap_j[t] * dil_w
                if 0 <= ix < wd:
                    edge_x[count] = tap_x[t] + xo * step
                    edge_w[count] = tap_w[t]
                    count += 1
            c0 = 0
            while c0 < o:
                if o - c0 < 8:                  # float depthwise only
                    _tail(xf, 0, 0, w, edge_x, edge_w, count, init, lo, hi, of, row + xo * o, 0, 1, c0, o)
                    break
                kind = 0 if o - c0 >= BLOCKS[0] else 1 if o - c0 >= BLOCKS[1] else 2
                xat, at = 0 if dense else c0, row + xo * o + c0
                if kind == 0:
                    _PIXEL_A(xf, xat, 0, w, c0, edge_x, edge_w, count, init, scale, offset, c0, lo, hi, of, at, 0)
                elif kind == 1:
                    _PIXEL_B(xf, xat, 0, w, c0, edge_x, edge_w, count, init, scale, offset, c0, lo, hi, of, at, 0)
                else:
                    _PIXEL_C(xf, xat, 0, w, c0, edge_x, edge_w, count, init, scale, offset, c0, lo, hi, of, at, 0)
                c0 += BLOCKS[kind]
        c0 = 0
        while c0 < o:
            if o - c0 < 8:                      # float depthwise only
                _tail(xf, first * step, step, w, tap_x, tap_w, taps, init, lo, hi, of, row + first * o, o,
                      last - first, c0, o)
                break
            kind = 0 if o - c0 >= BLOCKS[0] else 1 if o - c0 >= BLOCKS[1] else 2
            xo = first
            while xo < last:
                whole = xo + TILE_PIXELS <= last
                xat, at = xo * step + (0 if dense else c0), row + xo * o + c0
                if kind == 0 and whole:
                    _TILE_A(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                elif kind == 0:
                    _PIXEL_A(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                elif kind == 1 and whole:
                    _TILE_B(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                elif kind == 1:
                    _PIXEL_B(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                elif whole:
                    _TILE_C(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                else:
                    _PIXEL_C(xf, xat, step, w, c0, tap_x, tap_w, taps, init, scale, offset, c0, lo, hi, of, at, o)
                xo += TILE_PIXELS if whole else 1
            c0 += BLOCKS[kind]


@Compiled
def depthwise_f32(x, w, bias, out, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, lo, hi):  # pragma: no cover
    n, h, wd, c = x.shape
    kh, kw, co = w.shape
    _, oh, ow, _ = out.shape
    mult = co // c
    for task in prange(n * oh):
        b, y = task // oh, task % oh
        for xo in range(ow):
            for o in range(co):
                out[b, y, xo, o] = 0.0
        for i in range(kh):
            iy = y * stride_h - pad_top + i * dil_h
            if iy < 0 or iy >= h:
                continue
            for j in range(kw):
                for xo in range(ow):
                    ix = xo * stride_w - pad_left + j * dil_w
                    if ix < 0 or ix >= wd:
                        continue
                    if mult == 1:
                        for o in range(co):
                            out[b, y, xo, o] += x[b, iy, ix, o] * w[i, j, o]
                    else:
                        for o in range(co):
                            out[b, y, xo, o] += x[b, iy, ix, o // mult] * w[i, j, o]
        for xo in range(ow):
            for o in range(co):
                v = out[b, y, xo, o] + bias[o]
                if v < lo:
                    v = lo
                elif v > hi:
                    v = hi
                out[b, y, xo, o] = v


@Compiled
def depthwise_i8(x, w, zsum, zp, scale, offset, product32, shift, lo, top, out, stride_h, stride_w, dil_h, dil_w,
                 pad_top, pad_left):  # pragma: no cover
    """acc[o] = sum over in-bounds taps of (x - zp) * w' + zsum[o] (zsum = zp * sum of all taps' w', the
    padding's share), exact in int32; then `float_form`: clip(trunc(acc * scale + offset), 0, top) + lo, or with
    `product32` onnxruntime's `float32_form`: t = rint(float32(acc + offset) * float32(scale)) + shift."""
    n, h, wd, c = x.shape
    kh, kw, co = w.shape
    _, oh, ow, _ = out.shape
    mult = co // c
    for task in prange(n * oh):
        b, y = task // oh, task % oh
        acc = np.empty((ow, co), np.int32)
        for xo in range(ow):
            for o in range(co):
                acc[xo, o] = zsum[o]
        for i in range(kh):
            iy = y * stride_h - pad_top + i * dil_h
            if iy < 0 or iy >= h:
                continue
            for j in range(kw):
                for xo in range(ow):
                    ix = xo * stride_w - pad_left + j * dil_w
                    if ix < 0 or ix >= wd:
                        continue
                    if mult == 1:
                        for o in range(co):
                            acc[xo, o] += (np.int32(x[b, iy, ix, o]) - zp) * w[i, j, o]
                    else:
                        for o in range(co):
                            acc[xo, o] += (np.int32(x[b, iy, ix, o // mult]) - zp) * w[i, j, o]
        for xo in range(ow):
            for o in range(co):
                if product32:
                    t = np.float64(np.rint(np.float32(acc[xo, o] + offset[o]) * np.float32(scale[o]))) + shift
                else:
                    t = np.float64(acc[xo, o]) * scale[o] + offset[o]
                if t < 0.0:
                    t = 0.0
                elif t > top:
                    t = top
                out[b, y, xo, o] = np.int32(t) + lo


@Compiled
def bias_clamp(out, bias, lo, hi):  # pragma: no cover
    """out[m, c] = clamp(out[m, c] + bias[c], lo, hi) in place, for the rows of a GEMM's output."""
    rows, cols = out.shape
    for m in prange(rows):
        for o in range(cols):
            v = out[m, o] + bias[o]
            if v < lo:
                v = lo
            elif v > hi:
                v = hi
            out[m, o] = v


@Compiled
def prelu_rows(out, slope):  # pragma: no cover
    """out[m, c] = out[m, c] x slope[c] where negative, in place (a PReLU after a conv), over [rows, cols]."""
    rows, cols = out.shape
    for m in prange(rows):
        for o in range(cols):
            v = out[m, o]
            out[m, o] = v * slope[o] if v < 0 else v


@Compiled
def clamp(out, lo, hi):  # pragma: no cover
    """out = clamp(out, lo, hi) in place (a bias-free epilogue), over [rows, cols]."""
    rows, cols = out.shape
    for m in prange(rows):
        for o in range(cols):
            v = out[m, o]
            if v < lo:
                out[m, o] = lo
            elif v > hi:
                out[m, o] = hi


@Compiled
def requantize_rows(acc, scale, offset, lo, top, out):  # pragma: no cover
    """`float_form` over [M, C] accumulators (any layout) with scale/offset per C (or one, broadcast)."""
    rows, cols = acc.shape
    for m in prange(rows):
        for o in range(cols):
            t = np.float64(acc[m, o]) * scale[o] + offset[o]
            if t < 0.0:
                t = 0.0
            elif t > top:
                t = top
            out[m, o] = np.int32(t) + lo


@Compiled
def pool_f32(x, out, scale, kh, kw, stride_h, stride_w, dil_h, dil_w, pad_top, pad_left, average, lo,
             hi):  # pragma: no cover
    """Max or average pooling over the taps inside the input (max: padding never wins; average: padding adds
    zero and `scale` [OH, OW] holds 1 / count), then a clamp. Sums run in the numpy kernel's order: along W
    within each row of the window, then the rows. The channels are the innermost loop (contiguous in NHWC,
    so it vectorises): 4.8x faster than taps innermost on ResNet-50's 3x3 max pool, 1.2-2x on LeNet's."""
    n, h, wd, c = x.shape
    _, oh, ow, _ = out.shape
    for task in prange(n * oh):
        b, y = task // oh, task % oh
        acc = np.empty(c, np.float32)
        row = np.empty(c, np.float32)
        for xo in range(ow):
            for o in range(c):
                acc[o] = 0.0 if average else -np.inf
            for i in range(kh):
                iy = y * stride_h - pad_top + i * dil_h
                if iy < 0 or iy >= h:
                    continue
                if average:
                    for o in range(c):
                        row[o] = 0.0
                for j in range(kw):
                    ix = xo * stride_w - pad_left + j * dil_w
                    if ix < 0 or ix >= wd:
                        continue
                    if average:
                        for o in range(c):
                            row[o] += x[b, iy, ix, o]
                    else:
                        for o in range(c):
                            v = x[b, iy, ix, o]
                            if v > acc[o] or v != v:
                                acc[o] = v
                if average:
                    for o in range(c):
                        acc[o] += row[o]
            for o in range(c):
                v = acc[o] * scale[y, xo] if average else acc[o]
                if v < lo:
                    v = lo
                elif v > hi:
                    v = hi
                out[b, y, xo, o] = v


@Compiled
def max_pool_2x2(x, out, stride_h, stride_w, lo, hi):  # pragma: no cover
    """`pool_f32`'s max pool for 2x2 windows that all lie inside the input, then a clamp: the four taps of a pixel
    in one pass over its channels, without `pool_f32`'s per-tap bounds checks and running maximum, which keep
    its channel loop scalar (MobileNet-style blocks of MediaPipe's face mesh and palm detector, 96x96x16 ->
    48x48x16 on one core: 80 -> 15 us). np.maximum keeps a NaN, as the numpy kernel does."""
    n, h, wd, c = x.shape
    _, oh, ow, _ = out.shape
    for task in prange(n * oh):
        b, y = task // oh, task % oh
        top, bottom = x[b, y * stride_h], x[b, y * stride_h + 1]
        for j in range(ow):
            row = out[b, y, j]
            a0, a1, b0, b1 = top[j * stride_w], top[j * stride_w + 1], bottom[j * stride_w], bottom[j * stride_w + 1]
            for o in range(c):
                v = np.maximum(np.maximum(a0[o], a1[o]), np.maximum(b0[o], b1[o]))
                row[o] = lo if v < lo else (hi if v > hi else v)


GLOBAL_POOL_CHANNELS = 64    # channels per task of `global_pool_f32`: a GEMM panel's columns


@Compiled
def global_pool_f32(x, out, average, lo, hi):  # pragma: no cover
    """out [N, C] = clamp(mean or max of x [N, P, C] over its P pixels, lo, hi), max as `pool_f32` takes it.
    Tasks are runs of GLOBAL_POOL_CHANNELS channels, channel-run major, so each thread reads the columns the
    previous conv's GEMM wrote on that core when it took its panels in the same order."""
    n, p, c = x.shape
    runs = (c + GLOBAL_POOL_CHANNELS - 1) // GLOBAL_POOL_CHANNELS
    for task in prange(runs * n):
        b, c0 = task % n, task // n * GLOBAL_POOL_CHANNELS
        c1 = min(c, c0 + GLOBAL_POOL_CHANNELS)
        acc = np.empty(c1 - c0, np.float32)
        for o in range(c1 - c0):
            acc[o] = 0.0 if average else -np.inf
        for i in range(p):
            row = x[b, i, c0:c1]         # a view: the loops below vectorise (indexing x, the max did not)
            if average:
                for o in range(c1 - c0):
                    acc[o] += row[o]
            else:
                for o in range(c1 - c0):
                    v = row[o]
                    if v > acc[o] or v != v:
                        acc[o] = v
        for o in range(c1 - c0):
            v = acc[o] / np.float32(p) if average else acc[o]
            out[b, c0 + o] = lo if v < lo else hi if v > hi else v
