"""MaxRoiPool (Fast R-CNN): rois [R, 5] as (batch, x1, y1, x2, y2) in input pixels, rounded after scaling by
spatial_scale; each region of channels-last x [N, H, W, C] is split into pooled_h x pooled_w bins (floor/ceil
bounds, clipped to the image) and each bin keeps its maximum (0 when empty); output [R, PH, PW, C].
The loop runs over the offsets inside a bin, up to the largest bin; everything else is vectorised.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def bin_bounds(start: np.ndarray, end: np.ndarray, bins: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """[R, bins] first and one-past-last index of every bin along one axis."""
    extent = np.maximum(end - start + 1, 1).astype(np.float32)
    bin_size = extent / np.float32(bins)               # float32, as onnxruntime: it decides the bins' ends
    k = np.arange(bins, dtype=np.float32)[None, :]
    lo = np.clip(np.floor(k * bin_size[:, None]) + start[:, None], 0, size)
    hi = np.clip(np.ceil((k + 1) * bin_size[:, None]) + start[:, None], 0, size)
    return lo.astype(np.int64), hi.astype(np.int64)


@register("MaxRoiPool")
class MaxRoiPoolKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, rois = inputs[:2]
        a = self.attrs
        if x.rank != 4 or rois.rank != 2 or rois.shape[1] != 5 or x.dtype.kind != "f":
            raise self.error(f"x {list(x.shape)} (channels last, float) and rois {list(rois.shape)} must be "
                             f"[N, H, W, C] and [R, 5]")
        if a.pooled_h < 1 or a.pooled_w < 1:
            raise self.error(f"pooled_shape ({a.pooled_h}, {a.pooled_w}) must be positive", InvalidOpAttrError)
        return [TensorSpec((rois.shape[0], a.pooled_h, a.pooled_w, x.shape[3]), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, rois, out, a = inputs[0], inputs[1], outputs[0], self.attrs
        _, h, w, _ = x.shape
        batch = np.clip(rois[:, 0].astype(np.int64), 0, x.shape[0] - 1)[:, None, None]
        x1, y1, x2, y2 = (round_half_away(rois[:, k] * a.spatial_scale) for k in range(1, 5))
        hlo, hhi = bin_bounds(y1, y2, a.pooled_h, h)
        wlo, whi = bin_bounds(x1, x2, a.pooled_w, w)
        best = np.full(out.shape, -np.inf, x.dtype)
        for dy in range(int((hhi - hlo).max(initial=0))):
            rows = hlo + dy
            for dx in range(int((whi - wlo).max(initial=0))):
                cols = wlo + dx
                inside = ((rows < hhi)[:, :, None] & (cols < whi)[:, None, :])[..., None]
                taken = x[batch, np.minimum(rows, h - 1)[:, :, None], np.minimum(cols, w - 1)[:, None, :]]
                np.maximum(best, np.where(inside, taken, -np.inf), out=best)
        np.copyto(out, np.where(np.isneginf(best), 0, best))
