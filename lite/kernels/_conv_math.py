"""Sliding-window geometry, NHWC window views and the bias/activation epilogue shared by Conv2D,
Conv2DTranspose, Pooling (and FullConnection).

Everything here is decided at compile time: `Window` resolves padding modes (explicit, SAME_UPPER/LOWER, VALID)
and ceil mode for one spatial axis from the actual input size, so shapes stay right after `Resize`; the view
helpers build strided numpy views once (in `bind`) so a run only copies and multiplies.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lite.kernels.activation import activation_fn, clamp_bounds, leaky_relu
from schema import fb

PadMode = fb.PadMode
Activation = Callable[[np.ndarray, np.ndarray], None]


def finish(out: np.ndarray, bias: np.ndarray | None, activation: Activation | None) -> None:
    """The epilogue of Conv2D, Conv2DTranspose, FullConnection and Pooling: bias, then fused activation, in
    place on `out` (bias broadcasts along the last axis)."""
    if bias is not None:
        out += bias
    if activation is not None:
        activation(out, out)


def constant_view(array: np.ndarray | None) -> np.ndarray | None:
    """A writable copy of a read-only (mapped constant) array, else the array itself: compiled kernels then see
    one array type whatever the source (one compiled signature instead of two)."""
    return array.copy() if array is not None and not array.flags.writeable else array


def epilogue(out: np.ndarray, bias: np.ndarray | None, kind: int) -> Callable[[], None] | None:
    """`finish` prebound on `out` for a fused activation `kind`, or None when there is nothing to do."""
    if bias is None and clamp_bounds(kind) == clamp_bounds(0):
        return None
    return functools.partial(finish, out, bias, activation_fn(kind))


def with_residual(before: Callable[[], None] | None, out: np.ndarray, residual: np.ndarray,
                  activation: Callable | None) -> Callable[[], None]:
    """`before` (the op's own epilogue, if any), then out += residual and the activation, in place. A residual
    of fewer channels (last axis) than `out` is added to its first ones (a channel-padded shortcut)."""
    target = out[..., :residual.shape[-1]] if residual.shape[-1:] != out.shape[-1:] else out

    def run() -> None:
        if before is not None:
            before()
        np.add(target, residual, out=target)
        if activation is not None:
            activation(out, out)
    return run


def prelu(out: np.ndarray, slope: np.ndarray) -> Callable[[], None]:
    """A fused PReLU prebound on `out`: the negative values times the per-channel `slope` (last axis), in place."""
    return functools.partial(leaky_relu, out, out, slope)


def then(first: Callable[[], None] | None, second: Callable[[], None]) -> Callable[[], None]:
    """`first` (when there is one), then `second`."""
    if first is None:
        return second

    def run() -> None:
        first()
        second()
    return run


WIDE_ROW = 32    # floats per row from which a loop along it (a compiled epilogue, a column sum) runs at full SIMD width


def pixels_per_row(pixels: int, channels: int) -> int:
    """How many consecutive pixels (of `channels` floats each) one row of a per-channel pass spans: the fewest
    that make a row of WIDE_ROW floats and divide `pixels`, else 1."""
    least = -(-WIDE_ROW // channels)
    return next((k for k in range(least, 4 * least + 1) if pixels % k == 0), 1) if least > 1 else 1


@dataclass(frozen=True)
class Window:
    """Sliding-window geometry along one spatial axis.

    `pad_begin`/`pad_end` are the declared pads (what averaging may count); `extra_end` is the padding beyond
    them that ceil mode needs so every window lies inside the padded buffer (it never counts as data).
    """
    size: int
    kernel: int
    stride: int
    dilation: int
    pad_begin: int
    pad_end: int
    out: int
    extra_end: int = 0

    @property
    def span(self) -> int:
        """Extent of one dilated window."""
        return (self.kernel - 1) * self.dilation + 1

    @property
    def padded(self) -> int:
        """Extent of the padded buffer the windows slide over."""
        return self.size + self.pad_begin + self.pad_end + self.extra_end

    @property
    def has_padding(self) -> bool:
        return self.pad_begin > 0 or self.pad_end + self.extra_end > 0

    def taps_in(self, lo: int, hi: int) -> np.ndarray:
        """For each output position, how many of its taps fall in input coordinates [lo, hi)."""
        pos = (np.arange(self.out)[:, None] * self.stride - self.pad_begin
               + np.arange(self.kernel)[None, :] * self.dilation)
        return ((pos >= lo) & (pos < hi)).sum(axis=1)


def same_pads(size: int, kernel: int, stride: int, dilation: int, upper: bool) -> tuple[int, int]:
    """ONNX auto_pad SAME_*: pads giving ceil(size / stride) outputs; the odd pad goes to the end when `upper`."""
    out = -(-size // stride)
    total = max(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - size)
    small = total // 2
    return (small, total - small) if upper else (total - small, small)


def make_window(size: int, kernel: int, stride: int, dilation: int, mode: int, pad_begin: int, pad_end: int,
                ceil_mode: bool = False) -> Window:
    """The geometry of one axis; raises ValueError when the parameters cannot produce an output."""
    if kernel < 1 or stride < 1 or dilation < 1:
        raise ValueError(f"kernel {kernel}, stride {stride} and dilation {dilation} must be positive")
    if mode in (PadMode.SAME_UPPER, PadMode.SAME_LOWER):
        pad_begin, pad_end = same_pads(size, kernel, stride, dilation, mode == PadMode.SAME_UPPER)
    elif mode == PadMode.VALID:
        pad_begin = pad_end = 0
    elif pad_begin < 0 or pad_end < 0:
        raise ValueError(f"negative pads ({pad_begin}, {pad_end}) are not supported")
    span = (kernel - 1) * dilation + 1
    room = size + pad_begin + pad_end - span
    if room < 0:
        raise ValueError(f"window of extent {span} does not fit input size {size} with pads "
                         f"({pad_begin}, {pad_end})")
    out = room // stride + 1
    if ceil_mode and room % stride:
        out += 1
        if (out - 1) * stride >= size + pad_begin:   # a window may not start inside the end padding
            out -= 1
    extra = max(0, (out - 1) * stride + span - (size + pad_begin + pad_end))
    return Window(size, kernel, stride, dilation, pad_begin, pad_end, out, extra)


def padded_shape(batch: int, channels: int, wh: Window, ww: Window, phases: int = 1) -> tuple[int, ...]:
    """Shape of the buffer `PadCopy` fills: [phases, N, Hp, ceil(Wp / phases), C]."""
    return (phases, batch, wh.padded, -(-ww.padded // phases), channels)


@dataclass
class PadCopy:
    """Copies NHWC `x` into a padded buffer and fills its borders, all through views made once at bind time.

    The buffer is [P, N, Hp, ceil(Wp / P), C]: column q of the padded image lives in phase q % P at q // P. With
    P = the W stride, every tap of a strided window reads a contiguous run of columns, so products over
    [W, C] stay single contiguous loops. Borders are re-filled every run: arena scratch is shared.
    """
    copies: list[tuple[np.ndarray, np.ndarray]]
    borders: list[np.ndarray]
    fill: float

    @staticmethod
    def build(buffer: np.ndarray, x: np.ndarray, wh: Window, ww: Window, fill: float) -> "PadCopy":
        phases = buffer.shape[0]
        top, bottom = wh.pad_begin, wh.pad_begin + wh.size
        copies, borders = [], [buffer[:, :, :top], buffer[:, :, bottom:]]
        for p in range(phases):
            lo = max(0, -(-(ww.pad_begin - p) // phases))            # first k with p + k*P >= pad_begin
            hi = max(lo, -(-(ww.pad_begin + ww.size - p) // phases))
            first = p + lo * phases - ww.pad_begin                       # its input column
            if hi > lo:
                copies.append((buffer[p, :, top:bottom, lo:hi], x[:, :, first::phases][:, :, :hi - lo]))
            borders += [buffer[p, :, top:bottom, :lo], buffer[p, :, top:bottom, hi:]]
        return PadCopy(copies, [b for b in borders if b.size], fill)

    def __call__(self) -> None:
        for strip in self.borders:
            strip.fill(self.fill)
        for dst, src in self.copies:
            np.copyto(dst, src)


def axis_taps(x: np.ndarray, axis: int, win: Window) -> list[np.ndarray]:
    """One view of `x` per kernel tap of `win` along `axis`: tap k's input for every output position."""
    lead = (slice(None),) * axis
    last = (win.out - 1) * win.stride + 1
    return [x[lead + (slice(k * win.dilation, k * win.dilation + last, win.stride),)] for k in range(win.kernel)]


def tap_view(xp: np.ndarray, wh: Window, ww: Window, i: int, j: int) -> np.ndarray:
    """The [N, OH, OW, ...] view of padded NHWC `xp` that kernel tap (i, j) reads for every output position."""
    h0, w0 = i * wh.dilation, j * ww.dilation
    return xp[:, h0:h0 + (wh.out - 1) * wh.stride + 1:wh.stride, w0:w0 + (ww.out - 1) * ww.stride + 1:ww.stride]


def phased_tap_views(buffer: np.ndarray, wh: Window, ww: Window) -> list[np.ndarray]:
    """The [N, OH, OW, C] view each tap (i, j) reads from a `PadCopy` buffer whose phase count is the W stride
    (so, inside a phase, a tap's columns are contiguous)."""
    views = []
    for i in range(wh.kernel):
        rows = slice(i * wh.dilation, i * wh.dilation + (wh.out - 1) * wh.stride + 1, wh.stride)
        for j in range(ww.kernel):
            phase, column = (j * ww.dilation) % ww.stride, (j * ww.dilation) // ww.stride
            views.append(buffer[phase, :, rows, column:column + ww.out])
    return views


def patches(xp: np.ndarray, wh: Window, ww: Window) -> np.ndarray:
    """All windows of padded NHWC `xp` as one strided view [N, OH, OW, KH, KW, C] (no copy); copying it gives
    im2col columns in (kh, kw, c) order, which matches OHWI weights reshaped to [O, KH*KW*I]."""
    n, _, _, c = xp.shape
    sn, sh, sw, sc = xp.strides
    return as_strided(xp, (n, wh.out, ww.out, wh.kernel, ww.kernel, c),
                      (sn, sh * wh.stride, sw * ww.stride, sh * wh.dilation, sw * ww.dilation, sc), writeable=False)


def tap_columns(xp: np.ndarray, wh: Window, ww: Window, columns: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """(destination, source) pairs for `np.copyto` that fill `columns` [KH*KW*C, N*OH*OW] — the im2col columns
    of padded NHWC `xp` transposed, rows in (kh, kw, c) order — from one strided view [KH, KW, C, N, OH, OW], so
    the copy runs over whole rows of OW floats. With few channels (a first layer) im2col's runs of KW*C floats
    are too short to copy fast (5x slower at C = 1); one copy instead of one per tap saves numpy's per-call cost
    (13 us of 31 for a 5x5 kernel over 4 images)."""
    n, _, _, c = xp.shape
    sn, sh, sw, sc = xp.strides
    taps = as_strided(xp, (wh.kernel, ww.kernel, c, n, wh.out, ww.out),
                      (sh * wh.dilation, sw * ww.dilation, sc, sn, sh * wh.stride, sw * ww.stride), writeable=False)
    return [(columns.reshape(taps.shape), taps)]


def grouped_columns(xp: np.ndarray, wh: Window, ww: Window, group: int, columns: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(destination, source) for `np.copyto`: the im2col columns of padded NHWC `xp` per group, written into
    `columns` viewed as [G, N, OH, OW, KH, KW, C/G] (so [G, M, K/G] rows in (kh, kw, c) order). One helper for
    the fp32 and int8 convolutions and the filter gradient."""
    win = patches(xp, wh, ww)                                                   # [N, OH, OW, KH, KW, C]
    win = win.reshape(*win.shape[:5], group, xp.shape[-1] // group)
    return columns.reshape(group, *win.shape[:5], win.shape[-1]), np.moveaxis(win, 5, 0)   # (no -1: N may be 0)
