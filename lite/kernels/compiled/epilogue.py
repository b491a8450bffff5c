"""The compiled siblings' epilogue after a GEMM: bias and a clamp activation in one threaded pass; a fused
PReLU's slope or a hard-swish in another where the conv's own path cannot apply it."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from lite.kernels import _conv_math
from lite.kernels._conv_math import constant_view, pixels_per_row
from lite.kernels.activation import Activation, clamp_bounds
from lite.kernels.compiled import Bound, Compiled
from lite.kernels.compiled.llvm import prange
from schema import fb


def epilogue(out: np.ndarray, bias: np.ndarray | None, kind: int) -> Callable[[], None] | None:
    """`_conv_math.epilogue`, except that a clamp activation (none, RELU, RELU6) and the bias are one threaded
    pass, over rows of `pixels_per_row` output pixels: a loop over fewer than WIDE_ROW channels does not
    vectorise (LeNet-5's first conv, 6 channels, batch 128, one thread: 0.44 -> 0.07 ms)."""
    bounds = clamp_bounds(kind)
    if bias is None and bounds == clamp_bounds(0):
        return None
    if bounds is None or out.dtype != np.float32 or not out.size or not out.flags.c_contiguous:
        return _conv_math.epilogue(out, bias, kind)
    from lite.kernels.compiled import conv
    channels = out.shape[-1]
    pixels = pixels_per_row(out.size // channels, channels)
    rows = out.reshape(-1, pixels * channels)
    lo, hi = np.float32(bounds[0]), np.float32(bounds[1])
    if bias is None:
        return conv.clamp.bind(rows.size, rows, lo, hi)
    if pixels == 1:
        return conv.bias_clamp.bind(rows.size, rows, constant_view(bias), lo, hi)
    tiled = np.empty(pixels * channels, np.float32)      # refreshed at every run: a trained bias changes
    call = conv.bias_clamp.bind(rows.size, rows, tiled, lo, hi)
    return Bound(_tile_then, (tiled.reshape(pixels, channels), bias), call)


def prelu(out: np.ndarray, slope: np.ndarray) -> Callable[[], None]:
    """out = out x slope[c] where negative, in place, as one threaded pass over rows of `pixels_per_row` pixels
    (`_conv_math.prelu` where the compiled pass does not apply)."""
    if out.dtype != np.float32 or not out.size or not out.flags.c_contiguous:
        return _conv_math.prelu(out, slope)
    from lite.kernels.compiled import conv
    channels = out.shape[-1]
    pixels = pixels_per_row(out.size // channels, channels)
    rows = out.reshape(-1, pixels * channels)
    tiled = np.ascontiguousarray(np.tile(np.asarray(slope, np.float32), pixels))     # a constant: tiled once
    return conv.prelu_rows.bind(rows.size, rows, tiled)


def activation(out: np.ndarray, kind: int, fallback: Activation) -> Callable[[], None]:
    """A fused activation that is not a clamp, in place on `out`: hard-swish as one threaded pass over rows of
    `pixels_per_row` pixels (numpy's four passes ran on one thread: 0.1 ms on MediaPipe's 128x128x16 maps),
    any other as `fallback(out, out)`."""
    if kind != fb.ActivationType.HSWISH or out.dtype != np.float32 or not out.size or not out.flags.c_contiguous:
        return functools.partial(fallback, out, out)
    channels = out.shape[-1]
    rows = out.reshape(-1, pixels_per_row(out.size // channels, channels) * channels)
    return hard_swish_rows.bind(rows.size, rows)


@Compiled
def hard_swish_rows(out):  # pragma: no cover
    """out = out x clamp(out / 6 + 1/2, 0, 1) in place, over [rows, cols]."""
    rows, cols = out.shape
    sixth, half, zero, one = np.float32(1.0 / 6.0), np.float32(0.5), np.float32(0.0), np.float32(1.0)
    for m in prange(rows):
        for o in range(cols):
            v = out[m, o]
            gate = v * sixth + half
            if gate < zero:
                gate = zero
            elif gate > one:
                gate = one
            out[m, o] = v * gate


def _tile_then(tile: tuple[np.ndarray, np.ndarray], call: Callable[[], None]) -> None:
    np.copyto(*tile)
    call()
