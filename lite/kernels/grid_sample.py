"""GridSample: sample channels-last x [N, *spatial, C] (2-D or 3-D) at the normalised coordinates of grid
[N, *out, r] (grid[..., 0] is x along W, [1] y along H, [2] z along D; -1 and 1 are the edge pixels' centres
with align_corners, else their outer edges); output [N, *out, C]. ONNX semantics (opsets 16 and 20).

Per spatial axis the coordinate becomes tap indices and weights (nearest: one tap at the rounded coordinate,
half to even; linear: two; cubic: four, Keys with a = -0.75): the coordinate is first clamped (border; not for
cubic, where onnxruntime and PyTorch clamp only the taps while onnx.reference also clamps the coordinate) or
reflected (reflection) into the image, then every out-of-image tap reads zero (zeros), the edge (border) or its
mirror (reflection). The output is the weighted sum over the product of the axes' taps: a loop over at most
4^rank taps, each one gather of [C]-rows for every output position.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from schema import fb

CUBIC_A = -0.75


def unnormalize(g: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    return (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2


def coordinate_scale(size: int, align_corners: bool) -> float:
    """d(coordinate) / d(grid)."""
    return (size - 1) / 2 if align_corners else size / 2


def reflect(x: np.ndarray, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    """(x reflected into [lo, hi] by its near border until inside, d reflected / dx = +-1)."""
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo), np.zeros_like(x)
    below, above = x < lo, x > hi
    dx = np.where(below, lo - x, x - hi)
    flips = np.floor(dx / span)
    rest = dx - flips * span
    even = flips % 2 == 0
    reflected = np.where(below, np.where(even, lo + rest, hi - rest), np.where(even, hi - rest, lo + rest))
    sign = np.where(below, np.where(even, -1.0, 1.0), np.where(above, np.where(even, -1.0, 1.0), 1.0))
    outside = below | above
    return np.where(outside, reflected, x), np.where(outside, sign, 1.0).astype(x.dtype)


def cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Keys' cubic weights of taps -1, 0, 1, 2 at fraction t in [0, 1)."""
    def near(d: np.ndarray) -> np.ndarray:
        return ((CUBIC_A + 2) * d - (CUBIC_A + 3)) * d * d + 1

    def far(d: np.ndarray) -> np.ndarray:
        return ((CUBIC_A * d - 5 * CUBIC_A) * d + 8 * CUBIC_A) * d - 4 * CUBIC_A
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def cubic_weight_slopes(t: np.ndarray) -> list[np.ndarray]:
    """d(cubic_weights)/dt."""
    def near(d: np.ndarray) -> np.ndarray:
        return (3 * (CUBIC_A + 2) * d - 2 * (CUBIC_A + 3)) * d

    def far(d: np.ndarray) -> np.ndarray:
        return (3 * CUBIC_A * d - 10 * CUBIC_A) * d + 8 * CUBIC_A
    return [far(t + 1), near(t), -near(1 - t), -far(2 - t)]


@dataclass
class AxisTaps:
    """The taps of one spatial axis for every output position: indices (valid ones in [0, size)), weights,
    d(weight)/d(grid), and whether each tap lies on the image (zeros padding reads 0 elsewhere)."""
    index: list[np.ndarray]
    weight: list[np.ndarray]
    slope: list[np.ndarray]
    inside: list[np.ndarray]


def axis_taps(g: np.ndarray, size: int, mode: int, padding: int, align_corners: bool) -> AxisTaps:
    """The taps of normalised coordinates `g`."""
    return pixel_taps(unnormalize(g, size, align_corners), size, mode, padding, align_corners,
                      coordinate_scale(size, align_corners))


def pixel_taps(x: np.ndarray, size: int, mode: int, padding: int, align_corners: bool, scale: float = 1.0
               ) -> AxisTaps:
    """The taps of pixel coordinates `x` (0 = the first pixel's centre); `scale` = d(x)/d(what slopes are of)."""
    scale = np.full_like(x, scale)
    lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
    if mode == fb.ResizeMode.NEAREST:
        x = np.rint(x)
    if padding == fb.PaddingFill.EDGE and mode != fb.ResizeMode.CUBIC:   # cubic: only the taps clamp
        outside = (x < lo) | (x > hi)
        scale = np.where(outside, 0, scale)
        x = np.where(outside, np.clip(x, 0, size - 1), x)
    elif padding == fb.PaddingFill.REFLECT:
        x, sign = reflect(x, lo, hi)
        scale = scale * sign
    if mode == fb.ResizeMode.NEAREST:
        first, offsets = x, [0]
        weights = [np.ones_like(x)]
        slopes = [np.zeros_like(x)]
    else:
        first = np.floor(x)
        t = x - first
        if mode == fb.ResizeMode.LINEAR:
            offsets, weights, slopes = [0, 1], [1 - t, t], [-scale, scale]
        else:
            offsets, weights = [-1, 0, 1, 2], cubic_weights(t)
            slopes = [s * scale for s in cubic_weight_slopes(t)]
    first = first.astype(np.int64)
    index, inside = [], []
    for k in offsets:
        i = first + k
        inside.append((i >= 0) & (i < size))
        if padding == fb.PaddingFill.REFLECT:
            i = np.clip(reflect(i.astype(x.dtype), lo, hi)[0].astype(np.int64), 0, size - 1)
        index.append(np.clip(i, 0, size - 1))
    if padding != fb.PaddingFill.CONSTANT:
        inside = [np.ones_like(m) for m in inside]
    return AxisTaps(index, weights, slopes, inside)


def grid_taps(grid: np.ndarray, spatial: Sequence[int], mode: int, padding: int, align_corners: bool,
              slopes: bool = False) -> list[tuple[np.ndarray, np.ndarray, list[np.ndarray]]]:
    """For every combination of the axes' taps: (flat row index into x [N * prod(spatial), C], weight with
    zeros padding applied, d(weight)/d(grid[..., k]) for each grid component k when `slopes`), each [N, *out]."""
    rank = len(spatial)
    batch = np.arange(grid.shape[0]).reshape((-1,) + (1,) * (grid.ndim - 2))
    axes = [axis_taps(grid[..., rank - 1 - a], spatial[a], mode, padding, align_corners) for a in range(rank)]
    taps = []
    for combo in product(*(range(len(t.index)) for t in axes)):
        flat = batch
        weight = np.ones(grid.shape[:-1], grid.dtype)
        for a, k in enumerate(combo):
            flat = flat * spatial[a] + axes[a].index[k]
            weight = weight * np.where(axes[a].inside[k], axes[a].weight[k], 0)
        taps.append((flat, weight, [tap_slope(axes, combo, rank - 1 - comp) for comp in range(rank)] if slopes
                     else []))
    return taps


def tap_slope(axes: list[AxisTaps], combo: Sequence[int], driven: int) -> np.ndarray:
    """d(weight of tap `combo`)/d(the grid component that moves axis `driven`): the product rule."""
    s = 1.0
    for a, k in enumerate(combo):
        s = s * np.where(axes[a].inside[k], axes[a].slope[k] if a == driven else axes[a].weight[k], 0)
    return s


MODES = (fb.ResizeMode.LINEAR, fb.ResizeMode.NEAREST, fb.ResizeMode.CUBIC)
PADDINGS = (fb.PaddingFill.CONSTANT, fb.PaddingFill.EDGE, fb.PaddingFill.REFLECT)   # zeros, border, reflection


def check_grid_sample(kernel: Kernel, x: TensorSpec, grid: TensorSpec) -> tuple[int, ...]:
    """The output shape [N, *out, C]; raises on shapes or attributes that break the op's rule."""
    a = kernel.attrs
    if a.mode not in MODES or a.padding_mode not in PADDINGS:
        raise kernel.error(f"mode {a.mode} / padding_mode {a.padding_mode} is unknown", InvalidOpAttrError)
    if x.rank not in (4, 5) or grid.rank != x.rank or grid.shape[0] != x.shape[0] or grid.shape[-1] != x.rank - 2:
        raise kernel.error(f"x {list(x.shape)} (channels last) and grid {list(grid.shape)} must be "
                           f"[N, *spatial, C] and [N, *out, {x.rank - 2}] of the same rank")
    if x.dtype.kind != "f" or grid.dtype.kind != "f":
        raise kernel.error(f"x and grid must be float, got {x.dtype} and {grid.dtype}")
    return (x.shape[0], *grid.shape[1:-1], x.shape[-1])


@register("GridSample")
class GridSampleKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, grid = inputs[0], inputs[1]
        return [TensorSpec(check_grid_sample(self, x, grid), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, grid, out = inputs[0], inputs[1], outputs[0]
        rows = x.reshape(-1, x.shape[-1])
        a = self.attrs
        out.fill(0)
        for flat, weight, _ in grid_taps(grid, x.shape[1:-1], a.mode, a.padding_mode, bool(a.align_corners)):
            out += (weight[..., None] * rows[flat]).astype(out.dtype, copy=False)
