"""Resize: nearest / linear / cubic interpolation of every axis whose size or scale changes.

inputs: x, roi? ([starts..., ends...] normalised, for tf_crop_and_resize), scales? (one float per axis), sizes?
(one int per axis), constants or run-time values (the output shape is then inferred at every run); with the
`axes` attribute they hold values for those axes only. An empty scales/sizes tensor counts as absent. Output dims are
`sizes` when given, else floor(dim * scale). Coordinates map back with `scales` when given, else with
sizes / dims (ONNX); tf_crop_and_resize maps into the roi and gives `extrapolation_value` outside the input.
With `antialias`, linear and cubic downsampling by s stretch the filter to 1/s input pixels (ONNX / PIL).

Layout-generic: it resizes whichever axes change, so NHWC works once the converter permutes scales and sizes.
Separable: for each resized axis, compile time precomputes K source indices and weights per output position
(K = 1 nearest, 2 linear, 4 cubic); a run does K gathers and multiply-adds per axis into planned scratch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from lite.status import InvalidOpAttrError, NotSupportedError
from lite.traits import BEGIN_END, ONE_PER_AXIS, PER_AXIS, Layout, declare
from schema import fb

Mode, Coords, Rounding = fb.ResizeMode, fb.CoordinateTransform, fb.NearestRounding
_MODES = (Mode.NEAREST, Mode.LINEAR, Mode.CUBIC)
_TRANSFORMS = {v for k, v in vars(Coords).items() if not k.startswith("_")}
_ROUNDINGS = {v for k, v in vars(Rounding).items() if not k.startswith("_")}


def source_coords(transform: int, out_len: int, in_len: int, scale: float, roi: tuple[float, float] = (0.0, 1.0)
                  ) -> np.ndarray:
    """For each output position of one axis, the (fractional) input coordinate it samples.

    As in the ONNX reference, align_corners divides by `scale * in_len - 1` (the resized length before
    flooring); onnxruntime uses the floored length. They differ only when `scale * in_len` is fractional.
    """
    x = np.arange(out_len, dtype=np.float64)
    resized = scale * in_len        # the resized length before flooring (ONNX's output_width)
    if transform == Coords.TF_CROP_AND_RESIZE:
        start, end = roi
        if resized == 1:
            return np.full_like(x, (end - start) * (in_len - 1) / 2 + start * (in_len - 1))
        return x * (end - start) * (in_len - 1) / (resized - 1) + start * (in_len - 1)
    if transform == Coords.HALF_PIXEL:
        return (x + 0.5) / scale - 0.5
    if transform == Coords.HALF_PIXEL_SYMMETRIC:
        offset = in_len / 2 * (1 - out_len / resized)
        return offset + (x + 0.5) / scale - 0.5
    if transform == Coords.PYTORCH_HALF_PIXEL:
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(x)
    if transform == Coords.ALIGN_CORNERS:
        return x * (in_len - 1) / (resized - 1) if resized != 1 else np.zeros_like(x)
    if transform == Coords.ASYMMETRIC:
        return x / scale
    if transform == Coords.TF_HALF_PIXEL_FOR_NN:
        return (x + 0.5) / scale
    raise ValueError(f"unknown coordinate transform {transform}")


def nearest_taps(coords: np.ndarray, in_len: int, rounding: int) -> tuple[np.ndarray, None]:
    """([1, out] source indices, no weights): coordinates rounded as `rounding` says, clamped to the input."""
    if rounding == Rounding.ROUND_PREFER_FLOOR:
        index = np.ceil(coords - 0.5)
    elif rounding == Rounding.ROUND_PREFER_CEIL:
        index = np.floor(coords + 0.5)
    elif rounding == Rounding.FLOOR:
        index = np.floor(coords)
    elif rounding == Rounding.CEIL:
        index = np.ceil(coords)
    else:
        raise ValueError(f"unknown nearest rounding {rounding}")
    return np.clip(index, 0, in_len - 1).astype(np.intp)[None], None


def linear_taps(coords: np.ndarray, in_len: int) -> tuple[np.ndarray, np.ndarray]:
    """([2, out] indices, [2, out] weights) of linear interpolation with edge clamping."""
    left = np.floor(coords)
    t = coords - left
    index = np.clip(left[None] + np.arange(2)[:, None], 0, in_len - 1)
    return index.astype(np.intp), np.stack([1 - t, t])


def cubic_taps(coords: np.ndarray, in_len: int, a: float, exclude_outside: bool) -> tuple[np.ndarray, np.ndarray]:
    """([4, out] indices, [4, out] weights) of Keys cubic convolution with coefficient `a`; with
    `exclude_outside` the taps outside the input get weight 0 and the rest are renormalised."""
    index = np.floor(coords)[None] + np.arange(-1, 3)[:, None]
    distance = np.abs(index - coords[None])
    near = ((a + 2) * distance - (a + 3)) * distance * distance + 1                   # |d| <= 1
    far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a              # 1 < |d| < 2
    weight = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    if exclude_outside:
        weight = np.where((index < 0) | (index >= in_len), 0.0, weight)
        weight /= np.where(weight.sum(axis=0) == 0, 1.0, weight.sum(axis=0))
    return np.clip(index, 0, in_len - 1).astype(np.intp), weight


def antialias_taps(coords: np.ndarray, in_len: int, scale: float, cubic: bool, a: float, exclude_outside: bool
                   ) -> tuple[np.ndarray, np.ndarray]:
    """([K, out] indices, [K, out] weights) of linear (triangle) or cubic filtering stretched by 1 / scale when
    downsampling, normalised to sum 1 (the ONNX reference's taps: every input pixel within the support, indices
    beyond the edge read the edge unless `exclude_outside`)."""
    scale = min(scale, 1.0)
    first = int(np.floor((-2 if cubic else -1) / scale) + 1)
    base = np.where(coords == np.floor(coords), coords - 1, np.floor(coords))        # the reference's "ratio"
    index = base[None] + np.arange(first, 2 - first)[:, None]
    distance = np.abs(index - coords[None]) * scale
    if cubic:
        near = ((a + 2) * distance - (a + 3)) * distance * distance + 1
        far = ((a * distance - 5 * a) * distance + 8 * a) * distance - 4 * a
        weight = np.where(distance <= 1, near, np.where(distance < 2, far, 0.0))
    else:
        weight = np.clip(1 - distance, 0, 1)
    weight /= weight.sum(axis=0)
    if exclude_outside:
        weight = np.where((index < 0) | (index >= in_len), 0.0, weight)
        weight /= np.where(weight.sum(axis=0) == 0, 1.0, weight.sum(axis=0))
    return np.clip(index, 0, in_len - 1).astype(np.intp), weight


@dataclass
class AxisPass:
    """Resampling of one axis: out[..., j, ...] = sum_k weight[k, j] * src[..., index[k, j], ...]."""
    axis: int
    index: np.ndarray                 # [K, out] source indices
    weight: np.ndarray | None         # [K, out, 1, ..., 1] broadcastable weights; None for nearest
    shape: tuple[int, ...]            # shape after this pass
    outside: np.ndarray               # output positions that sample outside the input (tf_crop_and_resize)


def apply_pass(src: np.ndarray, p: AxisPass, dst: np.ndarray, tap: np.ndarray | None) -> None:
    """Write the resampling `p` of `src` into `dst`; `tap` is a work buffer of dst's shape (linear/cubic)."""
    np.take(src, p.index[0], axis=p.axis, out=dst, mode="clip")
    if p.weight is None:
        return
    if len(p.index) == 2:           # linear as a + (b - a) * t: one broadcast multiply instead of two
        np.take(src, p.index[1], axis=p.axis, out=tap, mode="clip")
        tap -= dst
        tap *= p.weight[1]
        dst += tap
        return
    dst *= p.weight[0]
    for index, weight in zip(p.index[1:], p.weight[1:]):
        np.take(src, index, axis=p.axis, out=tap, mode="clip")
        tap *= weight
        dst += tap


declare("Resize", layout=Layout(PER_AXIS, per_axis=((1, BEGIN_END), (2, ONE_PER_AXIS), (3, ONE_PER_AXIS))))


@register("Resize")
class ResizeKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        scales, sizes = (self._param(inputs, k, name) for k, name in ((2, "scales"), (3, "sizes")))
        if self.attrs.axes is not None and len(self.attrs.axes):
            scales, sizes = self._full_rank(x, scales, sizes)
        out_shape, scale = self._output(x, scales, sizes)
        self.rounding = self._rounding(scale)
        a = self.attrs
        roi = self._roi(inputs, x.rank)
        if a.mode != Mode.NEAREST and x.dtype.kind != "f":
            raise self.error(f"linear and cubic modes need a float input, got {x.dtype}", NotSupportedError)
        if a.mode not in _MODES or a.coordinate_transform not in _TRANSFORMS or a.nearest_rounding not in _ROUNDINGS:
            raise self.error(f"unknown mode {a.mode}, coordinate transform {a.coordinate_transform} or nearest "
                             f"rounding {a.nearest_rounding}", InvalidOpAttrError)
        changed = [d for d in range(x.rank) if out_shape[d] != x.shape[d] or scale[d] != 1.0
                   or tuple(roi[:, d]) != (0.0, 1.0)]
        changed.sort(key=lambda d: out_shape[d] / max(x.shape[d], 1))    # shrink first: less work after
        shape, self.passes = list(x.shape), []
        for d in changed:
            coords = source_coords(a.coordinate_transform, out_shape[d], x.shape[d], scale[d], tuple(roi[:, d]))
            index, weight = self._taps(coords, x.shape[d], scale[d])
            shape[d] = out_shape[d]
            if weight is not None:
                weight = weight.astype(x.dtype).reshape(weight.shape + (1,) * (x.rank - d - 1))
            outside = np.flatnonzero((coords < 0) | (coords > x.shape[d] - 1)) \
                if a.coordinate_transform == Coords.TF_CROP_AND_RESIZE else np.zeros(0, np.intp)
            self.passes.append(AxisPass(d, index, weight, tuple(shape), outside))
        self.dtype = x.dtype
        return [TensorSpec(tuple(out_shape), x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        """One buffer per intermediate pass result, then one tap buffer when weights are applied."""
        specs = [TensorSpec(p.shape, self.dtype) for p in self.passes[:-1]]
        tap_elements = max((math.prod(p.shape) for p in self.passes if p.weight is not None), default=0)
        return specs + ([TensorSpec((tap_elements,), self.dtype)] if tap_elements else [])

    def bind(self, inputs, outputs, scratch) -> None:
        intermediates = max(len(self.passes) - 1, 0)
        self.targets = list(scratch[:intermediates])
        tap = scratch[intermediates] if len(scratch) > intermediates else None
        self.taps = [tap[:math.prod(p.shape)].reshape(p.shape) if p.weight is not None else None
                     for p in self.passes]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if not self.passes:
            np.copyto(outputs[0], inputs[0])
            return
        src = inputs[0]
        for p, dst, tap in zip(self.passes, self.targets + [outputs[0]], self.taps):
            apply_pass(src, p, dst, tap)
            src = dst
        for p in self.passes:
            if p.outside.size:
                outputs[0][(slice(None),) * p.axis + (p.outside,)] = self.attrs.extrapolation_value

    # ---- compile-time helpers ------------------------------------------------------------------------------
    def _param(self, inputs: Sequence[TensorSpec | None], k: int, what: str) -> np.ndarray | None:
        spec = inputs[k] if len(inputs) > k else None
        if spec is None:
            return None
        value = self.known(spec, what).ravel()
        return value if value.size else None

    def _rounding(self, scales: list[float]) -> int:
        """The nearest rounding, resolving BY_SCALES (ONNX Upsample / Resize-10 as onnxruntime runs them)."""
        if self.attrs.nearest_rounding != Rounding.BY_SCALES:
            return self.attrs.nearest_rounding
        if any(s > 1 for s in scales) and any(s < 1 for s in scales):
            raise self.error(f"scales {scales} both up- and downsample, which needs per-axis rounding",
                             NotSupportedError)
        return Rounding.CEIL if any(s < 1 for s in scales) else Rounding.FLOOR

    def _full_rank(self, x: TensorSpec, scales: np.ndarray | None, sizes: np.ndarray | None
                   ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """(scales, sizes) for every axis from values given for `axes` only; with an aspect policy, one scale
        for all listed axes (the smallest or largest of sizes / dims) and sizes rounded half up from it."""
        axes = normalize_axes(self, list(self.attrs.axes), x.rank, "axes")
        given = sizes if sizes is not None else scales
        if given is None or given.size != len(axes):
            raise self.error(f"{0 if given is None else given.size} scales or sizes for axes {axes}")
        if sizes is None:
            full = np.ones(x.rank, np.float64)
            full[axes] = scales
            return full, None
        if self.attrs.aspect_policy == fb.AspectPolicy.STRETCH:
            full = np.array(x.shape, np.int64)
            full[axes] = sizes
            return None, full
        if min(x.shape[a] for a in axes) <= 0:
            raise self.error("keep_aspect_ratio_policy needs non-empty resized dims")
        ratios = [int(n) / x.shape[a] for a, n in zip(axes, sizes)]
        scale = min(ratios) if self.attrs.aspect_policy == fb.AspectPolicy.NOT_LARGER else max(ratios)
        full_scales, full_sizes = np.ones(x.rank, np.float64), np.array(x.shape, np.int64)
        full_scales[axes] = scale
        full_sizes[axes] = [int(scale * x.shape[a] + 0.5) for a in axes]
        return full_scales, full_sizes

    def _output(self, x: TensorSpec, scales: np.ndarray | None, sizes: np.ndarray | None
                ) -> tuple[list[int], list[float]]:
        """(output dims, per-axis coordinate scales) from the scales / sizes inputs."""
        for what, v in (("scales", scales), ("sizes", sizes)):
            if v is not None and v.size != x.rank:
                raise self.error(f"{what} has {v.size} values for a rank-{x.rank} input")
        if scales is not None and not np.all(scales > 0):
            raise self.error(f"scales {scales.tolist()} must be positive")
        if sizes is not None:
            out = [int(s) for s in sizes]
            if min(out, default=1) < 0 or any(o > 0 and n == 0 for o, n in zip(out, x.shape)):
                raise self.error(f"cannot resize {list(x.shape)} to sizes {out}")
            if scales is None:
                return out, [o / n if n else 1.0 for o, n in zip(out, x.shape)]
            return out, [float(s) for s in scales]
        if scales is None:
            raise self.error("needs scales or sizes")
        return [int(math.floor(n * float(s))) for n, s in zip(x.shape, scales)], [float(s) for s in scales]

    def _roi(self, inputs: Sequence[TensorSpec | None], rank: int) -> np.ndarray:
        """[2, rank] (starts, ends) of tf_crop_and_resize; the whole input otherwise."""
        whole = np.array([[0.0] * rank, [1.0] * rank])
        if self.attrs.coordinate_transform != Coords.TF_CROP_AND_RESIZE:
            return whole
        roi = self._param(inputs, 1, "roi")
        axes = normalize_axes(self, list(self.attrs.axes), rank, "axes") if self.attrs.axes is not None \
            and len(self.attrs.axes) else list(range(rank))
        if roi is None or roi.size != 2 * len(axes):
            raise self.error(f"tf_crop_and_resize needs a roi of {2 * len(axes)} values, got "
                             f"{None if roi is None else roi.size}")
        whole[:, axes] = roi.astype(np.float64).reshape(2, len(axes))
        return whole

    def _taps(self, coords: np.ndarray, in_len: int, scale: float) -> tuple[np.ndarray, np.ndarray | None]:
        a = self.attrs
        if a.antialias and a.mode != Mode.NEAREST and scale < 1:
            return antialias_taps(coords, in_len, scale, a.mode == Mode.CUBIC, a.cubic_coeff_a, a.exclude_outside)
        if a.mode == Mode.NEAREST:
            return nearest_taps(coords, in_len, self.rounding)
        if a.mode == Mode.LINEAR:
            return linear_taps(coords, in_len)
        return cubic_taps(coords, in_len, a.cubic_coeff_a, a.exclude_outside)
