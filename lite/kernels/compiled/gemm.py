"""Compiled float32 GEMM with the epilogue fused: out [M, N] = clamp(a [M, K] @ w [K, N] + bias, lo, hi) for a
constant weight, packed once. The GEMM of Conv2D when the compiled kernels run: 1x1 convs on their input, wider
convs on their windows read in place (`bind_gathered`: row m of A is, tap after tap, C floats at an offset of
the padded input, so no im2col columns are copied), first layers on im2col columns.

Why not BLAS: OpenBLAS multiplies most MobileNet- and ResNet-class shapes at 60-85 % of this kernel's rate on 2
threads (M = 49 rows: 60 %; the memory-bound K = 16 of MobileNetV2's first expansion is the exception), then bias
and activation take another pass over the product (MobileNetV2: 0.9 ms of 6.5), and its thread pool and the compiled
kernels' OpenMP pool cannot both keep their threads awake: whichever spins takes the core the other needs next, and
a sleeping thread on a virtual machine takes 40-400 us to wake. With every convolution's GEMM here, one pool runs a
whole CNN, and its workers may spin briefly between kernels (`lite.kernels.compiled.SPIN_COUNT`).

Register tiles (`_tile_code`, LLVM IR, as in `conv` and `int8`): `rows` rows x `vectors` vectors of `LANES` float32
(16 on AVX-512, else 8), the accumulators held in registers across a block of DEPTH_BLOCK k, started at the bias
(the first block; plus a conv's fused residual sum, `residual`) or at the partial sums in `out` (later ones),
clamped after the last; per k, the `vectors` weight vectors are loaded once and each row's a[m, k] is broadcast into
a fused multiply-add with them, and one cache line of the next block's weights is prefetched: in a whole network the
weights come from memory, not cache (ResNet-50's last layers read 4-9 MB each for 49 rows), and the hardware
prefetcher stops at every 4 KiB page (ResNet-50 batch 1 30.9 -> 29.6 ms). The weight is packed into panels [N /
PANEL, K, PANEL] (PANEL = VECTORS x LANES columns, zero past N) so that a tile reads it contiguously; the last
vector of a panel stores through a lane mask, so nothing past N is written. A tile finds its rows through a table of
row offsets (m x row stride for a plain matrix, the window origins for a conv), loaded once per tile and block of K;
blocks of K never cross a run of a window. Threads take (panel, block of rows) pairs, panel by panel or block by block,
whichever reads fewer bytes (`schedule`); rows past the last whole tile run as 1-row tiles. Sums run k = 0..K-1 in
fused multiply-adds: within float32 rounding of numpy's BLAS product (which sums in blocks), not bit for bit.
"""
from __future__ import annotations

import functools

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import (
    F32, I32, I64, LANES, WIDE, address, cgutils, intrinsic, ir, njit, prange, splat, types)
from lite.memory_plan import aligned_copy

VECTORS = 4 if WIDE else 2         # vectors per panel: 32 registers hold 24 accumulators, 16 hold 12
PANEL = VECTORS * LANES
# tile rows by the vectors of the panel it covers: about 24 accumulators on AVX-512, 12 else (wider panels than
# VECTORS never occur there, but every width is compiled)
ROWS = {4: 6, 3: 8, 2: 12, 1: 16} if WIDE else {4: 3, 3: 4, 2: 6, 1: 12}
DEPTH_BLOCK = 128   # K per pass over a task's rows: the panel's 128 x PANEL floats (32 KiB) stay in L1
PREFETCH_ROWS = DEPTH_BLOCK   # each k also prefetches (into L2) one line of the weight row this far ahead


def _tile_code(rows, vectors, context, builder, signature, args):
    """out[r + i, c + j] = prelu(clamp(start + sum_{k0 <= k < k1} A[r + i, k] panels[g, k, j], lo, hi)) for
    i < rows and j < vectors x LANES, where A[m, k] is the float at a's data + rows_at[m] + shift + k, and start
    is bias[c + j] when `first` is 1, bias[c + j] + residual[r + i, c + j] when it is 2 (zero past the residual's
    columns, which may be fewer than out's), else out[r + i, c + j] (a later block of K); prelu(t) is
    t x slope[c + j] where t < 0 when `last` is 1 (a PReLU fused after the last block of K), else t; the last
    vector is loaded and stored for its first `valid` lanes only."""
    a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last = args
    kinds = signature.args
    vec, mask_type = ir.VectorType(F32, LANES), ir.VectorType(ir.IntType(1), LANES)
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    pointer = lambda at: builder.inttoptr(at, vec.as_pointer())            # noqa: E731
    a_base = builder.add(address(context, builder, kinds[0], a)[0], builder.mul(shift, const(4)))
    at_base = builder.add(address(context, builder, kinds[1], rows_at)[0], builder.mul(r, const(8)))
    a_rows = [builder.add(a_base, builder.mul(builder.load(builder.inttoptr(builder.add(at_base, const(8 * i)),
                                                                           I64.as_pointer())), const(4)))
              for i in range(rows)]
    p_base, p_strides = address(context, builder, kinds[4], panels)
    p_base = builder.add(p_base, builder.mul(g, builder.extract_value(p_strides, 0)))
    b_base = builder.add(address(context, builder, kinds[8], bias)[0], builder.mul(c, const(4)))
    o_base, o_strides = address(context, builder, kinds[12], out)
    o_step = builder.extract_value(o_strides, 0)
    o_base = builder.add(builder.add(o_base, builder.mul(r, o_step)), builder.mul(c, const(4)))
    lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
    mask = builder.icmp_signed("<", lanes, splat(builder, valid, ir.VectorType(I64, LANES)))
    masked = lambda op, *types_: cgutils.get_or_insert_function(                  # noqa: E731
        builder.module, ir.FunctionType(*types_), f"llvm.masked.{op}.v{LANES}f32.p0v{LANES}f32")
    masked_load = masked("load", vec, [vec.as_pointer(), I32, mask_type, vec])
    masked_store = masked("store", ir.VoidType(), [vec, vec.as_pointer(), I32, mask_type])
    def element(base, step):
        return lambda i, v: pointer(builder.add(builder.add(base, builder.mul(const(i), step)), const(4 * LANES * v)))

    def load(at, v):
        return (builder.call(masked_load, [at, ir.Constant(I32, 4), mask, ir.Constant(vec, None)])
                if v == vectors - 1 else builder.load(at, align=4))

    at = element(o_base, o_step)
    r_proxy = cgutils.create_struct_proxy(kinds[13])(context, builder, value=residual)
    r_base, r_step = builder.ptrtoint(r_proxy.data, I64), builder.extract_value(r_proxy.strides, 0)
    residual_at = element(builder.add(builder.add(r_base, builder.mul(r, r_step)), builder.mul(c, const(4))), r_step)
    r_cols = builder.extract_value(r_proxy.shape, 1)      # the residual's own columns: out's first ones, or all

    def load_residual(i, v):
        """Vector v of the residual's row i, zero in the lanes past its columns."""
        column = splat(builder, builder.add(c, const(LANES * v)), lanes.type)
        inside = builder.icmp_signed("<", builder.add(lanes, column), splat(builder, r_cols, lanes.type))
        return builder.call(masked_load, [residual_at(i, v), ir.Constant(I32, 4), inside, ir.Constant(vec, None)])
    accs = [cgutils.alloca_once(builder, vec) for _ in range(rows * vectors)]
    with builder.if_else(builder.icmp_unsigned("!=", first, ir.Constant(first.type, 0))) as (from_bias, resume):
        with from_bias:
            for i in range(rows):
                for v in range(vectors):
                    start = builder.load(pointer(builder.add(b_base, const(4 * LANES * v))), align=4)
                    builder.store(start, accs[i * vectors + v])
            with builder.if_then(builder.icmp_unsigned("==", first, ir.Constant(first.type, 2))):
                for i in range(rows):
                    for v in range(vectors):
                        acc = accs[i * vectors + v]
                        builder.store(builder.fadd(builder.load(acc), load_residual(i, v)), acc)
        with resume:
            for i in range(rows):
                for v in range(vectors):
                    builder.store(load(at(i, v), v), accs[i * vectors + v])
    width = const(4 * PANEL)
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(vec, [vec] * 3), f"llvm.fma.v{LANES}f32")
    prefetch = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [
        ir.IntType(8).as_pointer(), I32, I32, I32]), "llvm.prefetch.p0i8")
    phase = builder.udiv(r, const(rows))
    with cgutils.for_range(builder, builder.sub(k1, k0)) as loop:
        k = builder.add(loop.index, k0)
        w_row = builder.add(p_base, builder.mul(k, width))
        ws = [builder.load(pointer(builder.add(w_row, const(4 * LANES * v))), align=4) for v in range(vectors)]
        line = builder.urem(builder.add(k, phase), const(vectors))     # tile after tile the next line
        ahead = builder.add(w_row, builder.add(const(PREFETCH_ROWS * 4 * PANEL), builder.mul(line, const(4 * LANES))))
        builder.call(prefetch, [builder.inttoptr(ahead, ir.IntType(8).as_pointer()),     # fetch the next block
                                ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])
        a_k = builder.mul(k, const(4))
        for i in range(rows):
            x = builder.load(builder.inttoptr(builder.add(a_rows[i], a_k), F32.as_pointer()), align=4)
            xv = splat(builder, x, vec)
            for v in range(vectors):
                acc = accs[i * vectors + v]
                builder.store(builder.call(fma, [xv, ws[v], builder.load(acc)]), acc)
    lo_v, hi_v = splat(builder, lo, vec), splat(builder, hi, vec)
    s_base = builder.add(address(context, builder, kinds[16], slope)[0], builder.mul(c, const(4)))
    zero = ir.Constant(vec, [0.0] * LANES)

    def store(slopes):
        """Clamp each accumulator (then scale its negative lanes by `slopes`, when given) into `out`."""
        for i in range(rows):
            for v in range(vectors):
                t = builder.load(accs[i * vectors + v])
                t = builder.select(builder.fcmp_ordered("<", t, lo_v), lo_v, t)
                t = builder.select(builder.fcmp_ordered(">", t, hi_v), hi_v, t)
                if slopes:
                    t = builder.select(builder.fcmp_ordered("<", t, zero), builder.fmul(t, slopes[v]), t)
                if v == vectors - 1:
                    builder.call(masked_store, [t, at(i, v), ir.Constant(I32, 4), mask])
                else:
                    builder.store(t, at(i, v), align=4)

    with builder.if_else(builder.icmp_unsigned("!=", last, ir.Constant(last.type, 0))) as (with_slope, plain):
        with with_slope:       # a fused PReLU (the last block of K only)
            store([builder.load(pointer(builder.add(s_base, const(4 * LANES * v))), align=4) for v in range(vectors)])
        with plain:
            store(None)
    return context.get_dummy_value()


def _tile_kernel(rows: int, vectors: int):
    @intrinsic
    def tile(typingctx, a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope,
             last):
        """One register tile of `rows` x `vectors` over one block of K (`_tile_code`)."""
        sig = types.void(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope,
                         last)
        return sig, functools.partial(_tile_code, rows, vectors)
    return tile


_T4, _R4, _T3, _R3, _T2, _R2, _T1, _R1 = (_tile_kernel(ROWS[v] if whole else 1, v) for v in (4, 3, 2, 1)
                                          for whole in (True, False))
TILE_ROWS = tuple(ROWS[v] for v in (1, 2, 3, 4))


@njit(nogil=True, cache=True)
def tile_rows(a, rows_at, shift, r0, r1, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first,
              vectors, slope, last):  # pragma: no cover
    """Rows r0..r1-1 of one panel over one block of K: whole register tiles of `vectors` vectors, then the rows
    past the last whole tile one at a time (the arguments as `_tile_code`'s)."""
    tile = TILE_ROWS[vectors - 1]
    r = r0
    while r < r1:
        whole = r + tile <= r1
        if vectors == 4 and whole:
            _T4(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif vectors == 4:
            _R4(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif vectors == 3 and whole:
            _T3(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif vectors == 3:
            _R3(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif vectors == 2 and whole:
            _T2(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif vectors == 2:
            _R2(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        elif whole:
            _T1(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        else:
            _R1(a, rows_at, shift, r, panels, g, k0, k1, bias, c, lo, hi, out, residual, valid, first, slope, last)
        r += tile if whole else 1


@Compiled
def gemm_f32(a, rows_at, taps_at, channels, panels, bias, slope, lo, hi, out, residual, start, prelu, block,
             rows_first):  # pragma: no cover
    """out = prelu(clamp(A @ w + bias (+ residual when start is 2), lo, hi)) (times slope[c] where negative, when
    `prelu` is 1), where row m of A is, tap after tap, the `channels` floats at a's data + rows_at[m] +
    taps_at[t]: a plain [M, K] matrix is one tap at rows_at[m] = m x its row stride, a convolution's windows start
    at each output pixel's window origin in the padded input, one tap per kernel offset. w is packed by
    `pack_panels` (K = taps x channels), `bias` and `slope` by `pad_bias`; tasks are (panel, `block` rows) pairs,
    each running K in blocks of at most DEPTH_BLOCK within one tap (clamped after the last), ordered by panel, or
    by block of rows when `rows_first` (`schedule`)."""
    rows, depth = len(rows_at), len(taps_at) * channels
    groups, cols = panels.shape[0], out.shape[1]
    blocks = (rows + block - 1) // block
    free = np.float32(np.inf)
    for task in prange(groups * blocks):
        if rows_first:
            r0, g = task // groups * block, task % groups
        else:
            g, r0 = task // blocks, task % blocks * block
        r1 = min(rows, r0 + block)
        c = g * PANEL
        width = min(PANEL, cols - c)
        vectors = (width + LANES - 1) // LANES
        valid = width - (vectors - 1) * LANES
        for t in range(len(taps_at)):
            shift = taps_at[t] - t * channels        # a + rows_at[m] + shift + k: tap t's channel k - t C
            for c0 in range(0, max(channels, 1), DEPTH_BLOCK):
                k0 = t * channels + c0
                k1 = min(k0 + DEPTH_BLOCK, (t + 1) * channels)
                first = start if k0 == 0 else 0
                low, high = (lo, hi) if k1 == depth else (-free, free)
                tile_rows(a, rows_at, shift, r0, r1, panels, g, k0, k1, bias, c, low, high, out, residual, valid,
                          first, vectors, slope, prelu if k1 == depth else 0)


def pack_panels(weight: np.ndarray) -> np.ndarray:
    """[K, N] float32 weight as [N / PANEL panels, K, PANEL], zero past N."""
    depth, cols = weight.shape
    groups = -(-cols // PANEL)
    full = np.zeros((depth, groups * PANEL), np.float32)
    full[:, :cols] = weight
    return aligned_copy(full.reshape(depth, groups, PANEL).transpose(1, 0, 2))


def pad_bias(bias: np.ndarray | None, cols: int) -> np.ndarray:
    """The bias (zeros when None) padded with zeros to whole panels: tiles load whole vectors of it."""
    padded = np.zeros(-(-cols // PANEL) * PANEL, np.float32)
    if bias is not None:
        padded[:cols] = bias
    return padded


TASKS = 8          # at least this many (panel, rows) tasks, so that 2 threads finish close together
ROW_BLOCK_BYTES = 512 << 10   # rows first: a block's rows of A stay in L2 while every panel reads them


def schedule(rows: int, depth: int, cols: int) -> tuple[int, bool]:
    """(rows per task, rows_first): whole tiles, few enough that the panels and row blocks make at least TASKS
    tasks, taken panel after panel (each panel's weights stay in cache while A streams past, once per panel); or
    blocks of at most ROW_BLOCK_BYTES of A, of even size, each read once by all panels in turn, when that moves
    fewer bytes (A read once, the weights once per block): at batch 16, 2 threads, ResNet-50 460 -> 423 ms a run,
    MobileNetV2 61.2 -> 57.1, EfficientNet-Lite0 76.8 -> 71.1 (its A is the previous layer's output, out of
    cache). Even blocks (196 rows as 102 + 94, not 126 + 70) keep both threads busy to the end: ResNet-50 ~428 ->
    ~411 ms at batch 16, ~33.3 -> ~32.4 at batch 1.

    Panel after panel splits the work unevenly when the last panel is partial: threads take contiguous runs of
    tasks, so with 80 columns (a panel of 64, one of 16) one thread got the whole first panel. Then, when the
    weights fit in L2 beside a block of A, blocks of rows are taken first, each with every panel: BlazeFace's
    16x16 1x1 convs (72-88 columns) at 2 threads ran 1.1-1.2x their one-thread time, now about 1.8x."""
    groups = -(-cols // PANEL)
    tile = ROWS[min(VECTORS, -(-cols // LANES))]
    blocks = max(1, -(-TASKS // groups))
    block = max(tile, -(-(-(-rows // blocks)) // tile) * tile)
    small = max(tile, ROW_BLOCK_BYTES // (4 * max(depth, 1)) // tile * tile)
    count = -(-rows // small)
    small = -(-(-(-rows // count)) // tile) * tile      # as many blocks, of even size: no short last block
    a_size, w_size = rows * depth, depth * cols
    if small < block and a_size * groups + w_size > a_size + w_size * count:
        return small, True
    uneven = groups > 1 and cols % PANEL and -(-rows // block) > 1
    return block, bool(uneven and 4 * w_size <= ROW_BLOCK_BYTES)


def bind(a: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, lo: float, hi: float, out: np.ndarray,
         residual: np.ndarray | None = None, slope: np.ndarray | None = None):
    """`gemm_f32` prebound: out [M, N] = prelu(clamp(a [M, K] @ weight [K, N] + bias (+ residual [M, N]), lo, hi)),
    the weight packed now (a copy: a weight that changes later is not seen). a, out and residual need unit stride
    along their rows."""
    rows, depth = a.shape
    return bind_gathered(a, np.arange(rows, dtype=np.int64) * (a.strides[0] // 4), np.zeros(1, np.int64), depth,
                         weight, bias, lo, hi, out, residual, slope)


def bind_gathered(source: np.ndarray, rows_at: np.ndarray, taps_at: np.ndarray, channels: int, weight: np.ndarray,
                  bias: np.ndarray | None, lo: float, hi: float, out: np.ndarray, residual: np.ndarray | None = None,
                  slope: np.ndarray | None = None):
    """`gemm_f32` prebound on rows gathered from float32 `source`: row m, tap t is the `channels` floats at
    element offset rows_at[m] + taps_at[t] from its data (an implicit im2col); `weight` [taps x channels, N].
    A `residual` [M, N] is added before the clamp (a conv's fused residual sum; [M, R] with R < N: added to the
    first R columns, a channel-padded shortcut); a per-column `slope` [N]
    multiplies the negative results after it (a fused PReLU)."""
    rows, cols = len(rows_at), out.shape[1]
    return gemm_f32.bind(rows * weight.shape[0] * cols, source, rows_at, taps_at, channels, pack_panels(weight),
                         pad_bias(bias, cols), pad_bias(slope, cols), np.float32(lo), np.float32(hi), out,
                         out if residual is None else residual, 1 if residual is None else 2,
                         0 if slope is None else 1, *schedule(rows, weight.shape[0], cols))
