"""Compiled Winograd F(4x4, 3x3) for dense 3x3 stride-1 convolutions, as MindSpore Lite's fp32 CPU
kernels run them: each 4x4 output tile is A^T [(G g G^T) * (B^T d B)] A over its 6x6 input tile d, so the
GEMM work is 36 products of [tiles, C] @ [C, O] instead of one [pixels, 9C] @ [9C, O], 4x fewer multiply-adds.
It pays once the GEMMs have rows enough to reuse the 36 transformed weights (`conv2d.COMPILED_WINOGRAD_TILES`).
ResNet-50's 3x3 convs at 2 threads, against the implicit-im2col GEMM (`gemm.bind_gathered`), batch 16: 56x56x64
10.7 -> 5.2 ms, 28x28x128 11.2 -> 4.6, 14x14x256 12.1 -> 5.7, 7x7x512 11.5 -> 6.0; batch 1: 0.64 -> 0.31,
0.77 -> 0.34, 0.65 -> 0.51-0.58 and (4 tiles) 0.75 -> 1.06, where the direct GEMM stays.

Fused per block of tiles, so nothing but the block leaves the cache: a task transforms its tiles' inputs into
V [36 x tiles, C], runs the 36 GEMMs of `gemm.tile_rows` into M, then transforms M back with bias, a residual
sum and the clamp activation fused. The transforms are straight-line vector code with the matrices' constants
baked in (`_input_code`, `_output_code`, LLVM IR as the GEMM's tiles): 36 loads, 36 stores and about 200 adds
and fused multiply-adds per tile and LANES channels, read from the input in place (a tile over the edge from a
zero-padded copy: the padding is never materialised). Tasks are (block of tiles, group of output panels) pairs,
dealt round-robin to one scratch slot per thread. The transforms scale inputs by up to 5 and outputs by up to 8,
so results are within about 1e-5 of the output's range of the direct convolution (F(2x2) is five times closer,
but saves 2.25x, not 4x).
"""
from __future__ import annotations

import numpy as np

from lite.kernel import TensorSpec
from lite.kernels.compiled import Compiled
from lite.kernels.compiled.gemm import DEPTH_BLOCK, PANEL, ROWS, VECTORS, tile_rows
from lite.kernels.compiled.llvm import F32, I32, I64, LANES, address, cgutils, intrinsic, ir, njit, prange, splat, types
from lite.memory_plan import aligned_zeros


# B^T, G and A^T of F(4x4, 3x3), interpolation points 0, +-1, +-2 and infinity
BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0],
               [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], float)
G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
              [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]])
AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]], float)
UNIT, SIZE = 4, 6


class _Vectors:
    """IR helpers over LANES float32 lanes, the first `valid` of them live: masked loads and stores at byte
    addresses, and constant matrices applied to lists of vectors."""

    def __init__(self, builder, valid):
        self.builder, self.vec = builder, ir.VectorType(F32, LANES)
        mask_type = ir.VectorType(ir.IntType(1), LANES)
        lanes = ir.Constant(ir.VectorType(I64, LANES), list(range(LANES)))
        self.mask = builder.icmp_signed("<", lanes, splat(builder, valid, ir.VectorType(I64, LANES)))
        def function(name, result, arguments):
            return cgutils.get_or_insert_function(builder.module, ir.FunctionType(result, arguments), name)
        suffix = f"v{LANES}f32.p0v{LANES}f32"
        self._load = function(f"llvm.masked.load.{suffix}", self.vec,
                              [self.vec.as_pointer(), I32, mask_type, self.vec])
        self._store = function(f"llvm.masked.store.{suffix}", ir.VoidType(),
                               [self.vec, self.vec.as_pointer(), I32, mask_type])
        self._fma = function(f"llvm.fma.v{LANES}f32", self.vec, [self.vec] * 3)

    def at(self, base, first, *terms):
        """The vector pointer first + sum(step x count) float32 past byte address `base`, for i64 values first and
        step and constant counts, `terms` the (step, count) pairs."""
        b, elements = self.builder, first
        for step, count in terms:
            elements = b.add(elements, b.mul(step, ir.Constant(I64, count)))
        return b.inttoptr(b.add(base, b.mul(elements, ir.Constant(I64, 4))), self.vec.as_pointer())

    def load(self, pointer):
        return self.builder.call(self._load, [pointer, ir.Constant(I32, 4), self.mask, ir.Constant(self.vec, None)])

    def store(self, value, pointer):
        self.builder.call(self._store, [value, pointer, ir.Constant(I32, 4), self.mask])

    def apply(self, matrix: np.ndarray, values: list) -> list:
        """matrix @ values: adds and subtracts for coefficients of +-1, fused multiply-adds for the others."""
        b, out = self.builder, []
        for row in matrix:
            acc = None
            for coef, value in zip(row, values):
                if coef == 0:
                    continue
                scale = ir.Constant(self.vec, [float(coef)] * LANES)
                if acc is None:
                    acc = value if coef == 1 else b.fmul(scale, value)
                elif abs(coef) == 1:
                    acc = b.fadd(acc, value) if coef == 1 else b.fsub(acc, value)
                else:
                    acc = b.call(self._fma, [scale, value, acc])
            out.append(acc)
        return out


def _input_code(context, builder, signature, args):
    """V = B^T d B for one tile and LANES channels: d[r, j] is the vector at element src_at + r row_step +
    j col_step of `src`, V[i x 6 + j] is stored at element v_at + (i x 6 + j) step of `v`."""
    src, src_at, row_step, col_step, v, v_at, step, valid = args
    lanes = _Vectors(builder, valid)
    src_base = address(context, builder, signature.args[0], src)[0]
    v_base = address(context, builder, signature.args[4], v)[0]
    d = [[lanes.load(lanes.at(src_base, src_at, (row_step, r), (col_step, j))) for j in range(SIZE)]
         for r in range(SIZE)]
    columns = [lanes.apply(BT, [d[r][j] for r in range(SIZE)]) for j in range(SIZE)]        # columns[j][i]
    for i in range(SIZE):
        for j, value in enumerate(lanes.apply(BT, [columns[s][i] for s in range(SIZE)])):
            lanes.store(value, lanes.at(v_base, v_at, (step, i * SIZE + j)))
    return context.get_dummy_value()


def _output_code(with_residual, context, builder, signature, args):
    """out = clamp(A^T M A + bias (+ residual), lo, hi) for one tile and LANES channels: M[i x 6 + j] is the
    vector at element m_at + (i x 6 + j) step of `m`; output (u, q) goes to element out_at + u row_step + q
    col_step of `out` (residual: res_at + u res_row + q res_col), for u < rows and q < cols only."""
    (m, m_at, step, bias, bias_at, out, out_at, row_step, col_step, residual, res_at, res_row, res_col, rows, cols,
     lo, hi, valid) = args
    kinds = signature.args
    lanes = _Vectors(builder, valid)
    const = lambda value: ir.Constant(I64, value)                                              # noqa: E731
    m_base = address(context, builder, kinds[0], m)[0]
    values = [lanes.load(lanes.at(m_base, m_at, (step, p))) for p in range(SIZE * SIZE)]
    columns = [lanes.apply(AT, [values[i * SIZE + j] for i in range(SIZE)]) for j in range(SIZE)]   # [j][u]
    start = lanes.load(lanes.at(address(context, builder, kinds[3], bias)[0], bias_at))
    out_base = address(context, builder, kinds[5], out)[0]
    res_base = address(context, builder, kinds[9], residual)[0]
    lo_v, hi_v = splat(builder, lo, lanes.vec), splat(builder, hi, lanes.vec)
    for u in range(UNIT):
        for q, value in enumerate(lanes.apply(AT, [columns[j][u] for j in range(SIZE)])):
            inside = builder.and_(builder.icmp_signed("<", const(u), rows), builder.icmp_signed("<", const(q), cols))
            with builder.if_then(inside):
                value = builder.fadd(value, start)
                if with_residual:
                    value = builder.fadd(value, lanes.load(lanes.at(res_base, res_at, (res_row, u), (res_col, q))))
                value = builder.select(builder.fcmp_ordered("<", value, lo_v), lo_v, value)
                value = builder.select(builder.fcmp_ordered(">", value, hi_v), hi_v, value)
                lanes.store(value, lanes.at(out_base, out_at, (row_step, u), (col_step, q)))
    return context.get_dummy_value()


@intrinsic
def _input_tile(typingctx, src, src_at, row_step, col_step, v, v_at, step, valid):
    """`_input_code` inlined."""
    return types.void(src, src_at, row_step, col_step, v, v_at, step, valid), _input_code


def _output_kernel(with_residual: bool):
    @intrinsic
    def output_tile(typingctx, m, m_at, step, bias, bias_at, out, out_at, row_step, col_step, residual, res_at,
                    res_row, res_col, rows, cols, lo, hi, valid):
        """`_output_code` inlined."""
        sig = types.void(m, m_at, step, bias, bias_at, out, out_at, row_step, col_step, residual, res_at, res_row,
                         res_col, rows, cols, lo, hi, valid)
        return sig, lambda *args: _output_code(with_residual, *args)
    return output_tile


_output_tile, _output_tile_residual = _output_kernel(False), _output_kernel(True)


@njit(nogil=True, cache=True)
def _transform_inputs(x, pad_h, pad_w, t0, count, th, tw, vs, block, tile):  # pragma: no cover
    """V [36 x block, C] of tiles t0..t0+count-1: in place for tiles inside the input, else from a zero-padded
    copy of the tile in `tile` [6, 6, C]."""
    n, h, w, c = x.shape
    sn, sh, sw, sc = x.strides[0] // 4, x.strides[1] // 4, x.strides[2] // 4, x.strides[3] // 4
    ts = tile.strides[0] // 4, tile.strides[1] // 4
    for t in range(count):
        index = t0 + t
        img, y0, x0 = index // (th * tw), index // tw % th * UNIT - pad_h, index % tw * UNIT - pad_w
        inside = y0 >= 0 and x0 >= 0 and y0 + SIZE <= h and x0 + SIZE <= w and sc == 1
        if not inside:
            tile[:] = 0.0
            for r in range(max(0, -y0), min(SIZE, h - y0)):
                for j in range(max(0, -x0), min(SIZE, w - x0)):
                    tile[r, j] = x[img, y0 + r, x0 + j]
        for k in range(0, c, LANES):
            valid = min(LANES, c - k)
            if inside:
                _input_tile(x, img * sn + y0 * sh + x0 * sw + k, sh, sw, vs, t * c + k, block * c, valid)
            else:
                _input_tile(tile, k, ts[0], ts[1], vs, t * c + k, block * c, valid)


@Compiled
def winograd_f32(x, panels, zeros, bias, lo, hi, out, residual, with_residual, pad_h, pad_w, block, group, v, m,
                 rows_at, tiles_in):  # pragma: no cover
    """out [N, OH, OW, O] = clamp(conv3x3(x) + bias (+ residual when with_residual), lo, hi) for NHWC x, the
    window starting pad_h / pad_w before the input; panels the packed U [36 x panel groups, C, PANEL]; v [slots,
    36 x block, C], m [slots, 36 x block, group x PANEL] and tiles_in [slots, 6, 6, C] the scratch of each slot."""
    n, h, w, c = x.shape
    oh, ow, o = out.shape[1], out.shape[2], out.shape[3]
    th, tw = (oh + UNIT - 1) // UNIT, (ow + UNIT - 1) // UNIT
    tiles = n * th * tw
    groups = panels.shape[0] // (SIZE * SIZE)
    blocks, parts = (tiles + block - 1) // block, (groups + group - 1) // group
    slots = v.shape[0]
    free = np.float32(np.inf)
    so = out.strides[0] // 4, out.strides[1] // 4, out.strides[2] // 4
    sr = residual.strides[0] // 4, residual.strides[1] // 4, residual.strides[2] // 4
    for slot in prange(slots):
        vs, ms = v[slot], m[slot]
        mcols = ms.shape[1]
        for task in range(slot, blocks * parts, slots):
            t0, g0 = task // parts * block, task % parts * group
            count, g1 = min(block, tiles - t0), min(groups, g0 + group)
            o0, o1 = g0 * PANEL, min(o, g1 * PANEL)
            _transform_inputs(x, pad_h, pad_w, t0, count, th, tw, vs, block, tiles_in[slot])
            for p in range(SIZE * SIZE):                    # M = V U, per tile position
                for g in range(g0, g1):
                    width = min(PANEL, o - g * PANEL)
                    vectors = (width + LANES - 1) // LANES
                    valid = width - (vectors - 1) * LANES
                    for k0 in range(0, c, DEPTH_BLOCK):
                        tile_rows(vs, rows_at, 0, p * block, p * block + count, panels, p * groups + g, k0,
                                  min(c, k0 + DEPTH_BLOCK), zeros, (g - g0) * PANEL, -free, free, ms, ms, valid,
                                  1 if k0 == 0 else 0, vectors, zeros, 0)
            for t in range(count):                          # out = A^T M A + bias (+ residual), clamped
                index = t0 + t
                img, y0, x0 = index // (th * tw), index // tw % th * UNIT, index % tw * UNIT
                rows, cols = min(UNIT, oh - y0), min(UNIT, ow - x0)
                out_at = img * so[0] + y0 * so[1] + x0 * so[2]
                res_at = img * sr[0] + y0 * sr[1] + x0 * sr[2]
                for k in range(0, o1 - o0, LANES):
                    valid = min(LANES, o1 - o0 - k)
                    if with_residual:
                        _output_tile_residual(ms, t * mcols + k, block * mcols, bias, o0 + k, out, out_at + o0 + k,
                                              so[1], so[2], residual, res_at + o0 + k, sr[1], sr[2], rows, cols,
                                              lo, hi, valid)
                    else:
                        _output_tile(ms, t * mcols + k, block * mcols, bias, o0 + k, out, out_at + o0 + k, so[1],
                                     so[2], residual, res_at + o0 + k, sr[1], sr[2], rows, cols, lo, hi, valid)


BLOCK_BYTES = 2 << 20   # a block's transformed inputs V at most this big (one core's L2): weights reused enough
TASKS_PER_THREAD = 2


def tiles(batch: int, out_h: int, out_w: int) -> int:
    return batch * -(-out_h // UNIT) * -(-out_w // UNIT)


def plan(batch: int, out_h: int, out_w: int, channels: int, out_channels: int, slots: int) -> tuple[int, int]:
    """(tiles per block, output panels per task), TASKS_PER_THREAD tasks a thread: the tiles are split first
    (every task of a block transforms its inputs again), in whole register tiles of at most BLOCK_BYTES of V,
    then the panels."""
    step, count = ROWS[VECTORS], tiles(batch, out_h, out_w)
    groups, tasks = -(-out_channels // PANEL), TASKS_PER_THREAD * slots
    cap = max(step, BLOCK_BYTES // (4 * SIZE * SIZE * channels) // step * step)
    block = min(cap, -(-count // -(-tasks // groups) // step) * step)
    parts = min(groups, -(-tasks // -(-count // block)))
    return block, -(-groups // parts)


def scratch_specs(batch: int, out_h: int, out_w: int, channels: int, out_channels: int,
                  slots: int) -> list[TensorSpec]:
    """Per thread slot: V [36 x block, C], M [36 x block, panels of a task] and a zero-padded input tile
    [6, 6, C] (for tiles over the input's edge)."""
    block, group = plan(batch, out_h, out_w, channels, out_channels, slots)
    f32, a = np.dtype(np.float32), SIZE
    return [TensorSpec((slots, a * a * block, channels), f32), TensorSpec((slots, a * a * block, group * PANEL), f32),
            TensorSpec((slots, a, a, channels), f32)]


def transformed_panels(weight: np.ndarray) -> np.ndarray:
    """OHWI [O, 3, 3, C] -> U = G g G^T packed as the GEMM's panels [36 x O / PANEL, C, PANEL], zero past O:
    per tile position one float64 row of kron(G, G) times the [9, C x O] taps, rounded once and written into
    place (ResNet-50's 512-channel layer: 110 ms as one einsum, 33 ms so)."""
    o, _, _, c = weight.shape
    groups, whole = -(-o // PANEL), o // PANEL
    taps = weight.transpose(1, 2, 3, 0).reshape(9, c * o).astype(np.float64)
    packed = aligned_zeros(SIZE * SIZE * groups * c * PANEL * 4).view(np.float32)
    packed = packed.reshape(SIZE * SIZE, groups, c, PANEL)
    for p, row in enumerate(np.kron(G, G)):
        u = (row @ taps).reshape(c, o)
        packed[p, :whole] = u[:, :whole * PANEL].reshape(c, whole, PANEL).transpose(1, 0, 2)
        if whole < groups:
            packed[p, whole, :, :o - whole * PANEL] = u[:, whole * PANEL:]
    return packed.reshape(-1, c, PANEL)


def bind(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, lo: float, hi: float, out: np.ndarray,
         pads: tuple[int, int], work: list[np.ndarray], residual: np.ndarray | None = None):
    """`winograd_f32` prebound for OHWI `weight` [O, 3, 3, C] (transformed and packed now) on the scratch of
    `scratch_specs`; out and residual need unit stride along their channels."""
    n, oh, ow, o = out.shape
    c, a, f32 = x.shape[3], SIZE, np.float32
    v, m, tiles_in = work
    panels = transformed_panels(weight)
    block = v.shape[1] // (a * a)
    group = m.shape[2] // PANEL
    rows_at = np.arange(a * a * block, dtype=np.int64) * c
    full = np.zeros(o, f32) if bias is None else np.asarray(bias, f32)
    work_size = 2 * tiles(n, oh, ow) * a * a * c * o
    return winograd_f32.bind(work_size, x, panels, np.zeros(group * PANEL, f32),
                             full, f32(lo), f32(hi), out, out if residual is None else residual,
                             residual is not None, pads[0], pads[1], block, group, v, m, rows_at, tiles_in)
