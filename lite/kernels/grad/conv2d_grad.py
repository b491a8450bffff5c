"""Gradients of Conv2D (NHWC x, OHWI weight): Conv2DGradInput, Conv2DGradFilter and BiasGrad.

With M = N*OH*OW output pixels, T = KH*KW kernel taps and K = T*C/group window columns in (kh, kw, c) order:
- dx = col2im(dy @ W): per group and tap one GEMM [M, O/G] @ [O/G, C/G] (a single batched matmul) into
  tap-major columns [T, G, M, C/G], then one strided add per tap of its block into dx. Tap-major blocks are
  contiguous, so a stride-1 add runs over whole [OW*C] rows even when C is small (2.2x faster than adds from
  [M, K] columns at C = 6). Taps are clipped to the data region at compile time (`data_taps`), so padding needs
  no buffer and no crop. A 1x1 stride-1 unpadded dense conv is the bare GEMM dx = dy @ W.
- dW = dy^T @ im2col(x): the forward's padded copy and window view, a GEMM [O/G, m] @ [m, K] per block of images
  whose columns fit in L2 (`COLUMN_BLOCK_BYTES`), the blocks' products summed into the OHWI gradient. Columns of
  the whole batch overflow the cache (LeNet-5's first conv at batch 128: 10 MB, its dW 1.9 -> 1.2 ms on one
  thread in blocks of 3 images). With few input channels (a first layer) im2col's runs of KW*C floats are too
  short to copy fast, so the columns are laid out transposed, [T*C, m], copied in runs of OW floats, and
  dW^T = columns^T @ dy (1.9x faster at C = 1).
- Depthwise (group == C == O): dW[c, i, j] = sum(dy * x window), one einsum over the padded input's window
  view. dx at unit stride is the transposed conv as one einsum: dy, padded, correlated with the flipped taps;
  at larger strides (where that correlation would multiply stride^2 times as many zeros) the tap-major columns
  are dy times each tap's weights, one broadcast multiply, scattered as above.
The compiled siblings (`compiled/conv2d_grad.py`) run depthwise dx and dW, and the dx of one-group convs of few
input channels, as threaded passes of their own.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import (PadCopy, PadMode, Window, grouped_columns, make_window, padded_shape, patches,
                                     pixels_per_row, tap_columns)
from lite.kernels._reduce_math import column_sums
from lite.kernels.conv2d import COLUMN_BLOCK_BYTES, Geometry, block_pixels, conv_geometry, image_blocks
from lite.status import InvalidOpAttrError, NotSupportedError
from schema import fb

Index = tuple[slice, slice, slice]
NARROW_CHANNELS = 4     # dW of a dense conv with at most this many input channels uses transposed columns


@dataclass(frozen=True)
class Tap:
    """Kernel tap (i, j) restricted to the output positions whose window reads data there (not padding):
    `out` indexes those positions in [N, OH, OW, ...] arrays, `src` the input pixels they read in [N, H, W, ...]."""
    i: int
    j: int
    out: Index
    src: Index


def strided_range(offset: int, stride: int, count: int, size: int) -> tuple[slice, slice] | None:
    """Positions o in [0, count) whose target o * stride + offset lies in [0, size): (those o, their targets);
    None when there are none."""
    lo = max(0, -(offset // stride))
    hi = min(count, (size - 1 - offset) // stride + 1)
    if hi <= lo:
        return None
    return slice(lo, hi), slice(lo * stride + offset, (hi - 1) * stride + offset + 1, stride)


def tap_range(win: Window, k: int) -> tuple[slice, slice] | None:
    """(output positions, input positions) of tap k along one axis that fall on data; None when none do."""
    return strided_range(k * win.dilation - win.pad_begin, win.stride, win.out, win.size)


def transposed_axis(win: Window) -> tuple[Window, tuple[slice, slice] | None]:
    """The input gradient along one axis as a stride-1 correlation with the flipped kernel: the window it slides
    over a zeroed buffer of size + span - 1 positions, and (the dy positions that land in that buffer, where
    they land: spread out by the stride, shifted by the transposed conv's padding)."""
    length = win.size + win.span - 1
    gather = make_window(length, win.kernel, 1, win.dilation, PadMode.VALID, 0, 0)
    return gather, strided_range(win.span - 1 - win.pad_begin, win.stride, win.out, length)


def data_taps(wh: Window, ww: Window) -> list[Tap]:
    """Every tap that reads data somewhere, in scan order (row-major over the kernel)."""
    taps = []
    for i in range(wh.kernel):
        for j in range(ww.kernel):
            rows, cols = tap_range(wh, i), tap_range(ww, j)
            if rows and cols:
                taps.append(Tap(i, j, (slice(None), rows[0], cols[0]), (slice(None), rows[1], cols[1])))
    return taps


def is_depthwise(g: Geometry) -> bool:
    return g.group > 1 and g.group == g.in_channels == g.out_channels


def is_direct(g: Geometry) -> bool:
    """A 1x1 stride-1 unpadded dense conv: the NHWC input itself is the [M, C] column matrix."""
    return (g.group == 1 and g.wh.kernel == g.ww.kernel == 1 and g.wh.stride == g.ww.stride == 1
            and not g.padded)


def check_dy(kernel: Kernel, dy: TensorSpec, g: Geometry) -> None:
    if dy.shape != g.out_shape:
        raise kernel.error(f"dy {list(dy.shape)} is not the conv output shape {list(g.out_shape)}")


def grouped_dy(dy: np.ndarray, g: Geometry) -> np.ndarray:
    """dy as [G, M, O/G] (a view)."""
    return dy.reshape(g.rows, g.group, g.out_channels // g.group).transpose(1, 0, 2)


@register("BiasGrad", DataType.FLOAT32)
class BiasGradKernel(Kernel):
    """inputs: dy [..., C] -> db [C], the sum over every other axis. With few channels dy is summed as rows of
    several pixels, then those partial sums (a GEMV over 6 columns runs 3x slower than over 42)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy = inputs[0]
        if dy.rank < 1:
            raise self.error("dy must have at least one dimension")
        self.channels = dy.shape[-1]
        pixels = int(np.prod(dy.shape[:-1], dtype=np.int64))
        self.pixels = pixels_per_row(pixels, self.channels) if self.channels else 1
        return [TensorSpec(dy.shape[-1:], dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec((self.pixels, self.channels), np.dtype(np.float32))] if self.pixels > 1 else []

    def bind(self, inputs, outputs, scratch) -> None:
        dy, db = inputs[0], outputs[0]
        rows = dy.reshape(-1, self.pixels * dy.shape[-1])
        self.sums = [(rows, scratch[0].reshape(-1)), (scratch[0], db)] if scratch else [(rows, db)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for rows, out in self.sums:
            column_sums(rows, out)


class _ConvGradKernel(Kernel):
    """Shared attribute checks of the conv gradients (their tables repeat Conv2D's)."""

    def check_activation(self) -> None:
        if self.attrs.activation != fb.ActivationType.NO_ACTIVATION:
            raise self.error("a conv with a fused activation has no gradient kernel (training graphs keep "
                             "activations separate)", NotSupportedError)


@register("Conv2DGradInput", DataType.FLOAT32)
class Conv2DGradInputKernel(_ConvGradKernel):
    """inputs: dy [N, OH, OW, O], weight OHWI, x (the forward input; only its shape is read) -> dx [N, H, W, C]."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, w, x = inputs[:3]
        self.check_activation()
        g = conv_geometry(self, x, w)
        check_dy(self, dy, g)
        self.geo, self.depthwise, self.direct = g, is_depthwise(g), is_direct(g)
        return [TensorSpec(x.shape, dy.dtype)]

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g = self.geo
        self.gather = self.depthwise and g.wh.stride == g.ww.stride == 1
        if self.gather:
            (self.wh, rows), (self.ww, cols) = transposed_axis(g.wh), transposed_axis(g.ww)
            self.spread = (rows, cols) if rows and cols else None

    def scratch(self) -> list[TensorSpec]:
        g, f32 = self.geo, np.dtype(np.float32)
        taps = g.wh.kernel * g.ww.kernel
        if self.gather:
            return [TensorSpec((g.batch, self.wh.size, self.ww.size, g.in_channels), f32),
                    TensorSpec((g.wh.kernel, g.ww.kernel, g.in_channels), f32)]
        if self.depthwise:
            return [TensorSpec((taps,) + g.out_shape, f32), TensorSpec((taps, g.in_channels), f32)]
        return [] if self.direct else [TensorSpec((taps, g.group, g.rows, g.in_channels // g.group), f32)]

    def bind(self, inputs, outputs, scratch) -> None:
        dy, w, dx = inputs[0], inputs[1], outputs[0]
        g = self.geo
        self.tap_copy = None          # (contiguous scratch, weight view): depthwise taps copied at every run
        if self.gather:
            self._bind_gather(dy, w, *scratch)
            return
        if self.direct:
            self.product = (dy.reshape(g.rows, -1), w.reshape(g.out_channels, -1), dx.reshape(g.rows, -1))
            return
        cg, og, taps = g.in_channels // g.group, g.out_channels // g.group, g.wh.kernel * g.ww.kernel
        columns = scratch[0]
        if self.depthwise:            # columns [T, N, OH, OW, C]: dy times each tap's per-channel weight
            self.tap_copy = (scratch[1], w.reshape(g.out_channels, taps).T)    # contiguous: a 2x faster product
            self.product = (dy[None], scratch[1][:, None, None, None, :], columns)
            blocks = columns.reshape(g.wh.kernel, g.ww.kernel, *g.out_shape[:3], g.group, cg)
        else:                         # columns [T, G, M, C/G]: one GEMM per tap and group
            self.product = (grouped_dy(dy, g)[None], w.reshape(g.group, og, taps, cg).transpose(2, 0, 1, 3),
                            columns)
            blocks = np.moveaxis(columns.reshape(g.wh.kernel, g.ww.kernel, g.group, *g.out_shape[:3], cg), 2, 5)
        dx5 = dx.reshape(*dx.shape[:3], g.group, cg)
        self.scatter = [(dx5[t.src], blocks[t.i, t.j][t.out]) for t in data_taps(g.wh, g.ww)]

    def _bind_gather(self, dy: np.ndarray, w: np.ndarray, buffer: np.ndarray, flipped: np.ndarray) -> None:
        """Depthwise, unit stride: dx = the correlation of `buffer` (dy with the transposed conv's padding) with
        the flipped taps, copied to a contiguous [KH, KW, C] array at every run (einsum runs 10x slower on the
        reversed OHWI view)."""
        g = self.geo
        self.buffer = buffer
        self.spread_copy = None
        if self.spread:
            (o_rows, b_rows), (o_cols, b_cols) = self.spread
            self.spread_copy = (buffer[:, b_rows, b_cols], dy[:, o_rows, o_cols])
        taps = w.reshape(g.out_channels, g.wh.kernel, g.ww.kernel).transpose(1, 2, 0)
        self.tap_copy = (flipped, taps[::-1, ::-1])
        self.windows = (patches(buffer, self.wh, self.ww), flipped)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dx = outputs[0]
        if self.tap_copy is not None:
            np.copyto(*self.tap_copy)
        if self.gather:
            self.buffer.fill(0.0)
            if self.spread_copy is not None:
                np.copyto(*self.spread_copy)
            np.einsum("nhwijc,ijc->nhwc", *self.windows, out=dx)
            return
        (np.multiply if self.depthwise else np.matmul)(*self.product[:2], out=self.product[2])
        if self.direct:
            return
        dx.fill(0.0)
        for dst, block in self.scatter:
            dst += block


@register("Conv2DGradFilter", DataType.FLOAT32)
class Conv2DGradFilterKernel(_ConvGradKernel):
    """inputs: dy [N, OH, OW, O], x [N, H, W, C] -> dweight OHWI [O, KH, KW, C/group] (KH, KW from the
    kernel_h / kernel_w attributes)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[:2]
        a = self.attrs
        self.check_activation()
        if dy.rank != 4 or x.rank != 4:
            raise self.error(f"needs 4-D NHWC dy and x, got ranks {dy.rank} and {x.rank}")
        if a.kernel_h < 1 or a.kernel_w < 1:
            raise self.error(f"kernel_h and kernel_w must be positive, got {a.kernel_h}x{a.kernel_w}",
                             InvalidOpAttrError)
        group = a.group or 1
        if x.shape[3] % group:
            raise self.error(f"input channels {x.shape[3]} do not divide by group {group}")
        w = TensorSpec((dy.shape[3], a.kernel_h, a.kernel_w, x.shape[3] // group), dy.dtype)
        g = conv_geometry(self, x, w)
        check_dy(self, dy, g)
        self.geo, self.depthwise, self.direct = g, is_depthwise(g), is_direct(g)
        return [w]

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g = self.geo
        self.narrow = g.group == 1 and g.in_channels <= NARROW_CHANNELS and not self.direct

    def scratch(self) -> list[TensorSpec]:
        g, f32 = self.geo, np.dtype(np.float32)
        padded = [TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), f32)] if g.padded else []
        if self.depthwise:
            return padded + [TensorSpec((g.wh.kernel, g.ww.kernel, g.out_channels), f32)]
        if self.direct:
            return []
        blocks = image_blocks(g)
        columns = TensorSpec((g.group * g.depth * block_pixels(g, blocks[0]),), f32)
        if self.narrow:     # one block's columns, every block's product, their sum
            return padded + [columns, TensorSpec((len(blocks), g.depth, g.out_channels), f32),
                             TensorSpec((g.depth, g.out_channels), f32)]
        return padded + [columns, TensorSpec((len(blocks), g.group, g.out_channels // g.group, g.depth), f32)]

    def bind(self, inputs, outputs, scratch) -> None:
        dy, x, dw = inputs[0], inputs[1], outputs[0]
        g = self.geo
        work = list(scratch)
        self.pad, self.blocks, self.total, self.unpack = None, [], None, None
        dw3 = dw.reshape(g.group, g.out_channels // g.group, g.depth)
        if self.direct:
            self.blocks = [([], (grouped_dy(dy, g).transpose(0, 2, 1)[0], x.reshape(g.rows, g.in_channels)),
                            dw3[0])]
            return
        source = work.pop(0) if g.padded else x[None]                            # [1, N, Hp, Wp, C]
        self.pad = PadCopy.build(source, x, g.wh, g.ww, 0.0) if g.padded else None
        xp = source[0]
        if self.depthwise:        # einsum into [KH, KW, C] (contiguous over C), then into OHWI
            taps = work[0]
            self.einsum = (dy, patches(xp, g.wh, g.ww), taps)
            self.unpack = (dw.reshape(g.out_channels, g.wh.kernel, g.ww.kernel), taps.transpose(2, 0, 1))
            return
        flat, parts = work[0], work[1]
        dy2, area = dy.reshape(g.rows, g.out_channels), g.wh.out * g.ww.out
        for images, part in zip(image_blocks(g), parts):
            m = block_pixels(g, images)
            rows = dy2[images.start * area:images.stop * area]
            if self.narrow:       # columns^T [T*C, m]: each tap copies whole rows; dW^T = columns^T @ dy
                columns = flat[:g.depth * m].reshape(g.depth, m)
                self.blocks.append((tap_columns(xp[images], g.wh, g.ww, columns), (columns, rows), part))
            else:                 # columns [G, m, K/G]; dW = dy^T @ columns per group
                columns = flat[:g.group * m * g.depth].reshape(g.group, m, g.depth)
                lhs = rows.reshape(m, g.group, -1).transpose(1, 2, 0)            # [G, O/G, m]
                self.blocks.append(([grouped_columns(xp[images], g.wh, g.ww, g.group, columns)], (lhs, columns),
                                    part))
        if self.narrow:
            taps = g.wh.kernel * g.ww.kernel
            self.total = (parts, work[2])
            self.unpack = (dw.reshape(g.out_channels, taps, g.in_channels),
                           work[2].reshape(taps, g.in_channels, g.out_channels).transpose(2, 0, 1))
        else:
            self.total = (parts, dw3)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.depthwise:
            if self.pad is not None:
                self.pad()
            np.einsum("nhwc,nhwijc->ijc", *self.einsum[:2], out=self.einsum[2])
        else:
            if self.pad is not None:
                self.pad()
            for copies, operands, out in self.blocks:
                for dst, src in copies:
                    np.copyto(dst, src)
                np.matmul(*operands, out=out)
            if self.total is not None:
                parts, total = self.total
                np.sum(parts, axis=0, out=total)
        if self.unpack is not None:
            np.copyto(*self.unpack)
