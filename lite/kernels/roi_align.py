"""RoiAlign: for each region of interest (rois [R, 4] as x1, y1, x2, y2 in input pixels times spatial_scale,
batch_indices [R]), an [output_height, output_width] grid of bins over channels-last x [N, H, W, C], each the
mean (or max) of bilinear samples on a sampling_ratio x sampling_ratio grid (ceil(bin size) when 0); output
[R, OH, OW, C]. ONNX / onnxruntime semantics: half_pixel shifts coordinates by -0.5 (opset 16's default; opset
10 behaves as output_half_pixel, which instead widens regions to at least one pixel), samples more than one
pixel outside the image read 0, and max mode takes the largest weighted corner value of each sample.

Vectorised over regions, bins and channels; the loop runs over sample positions inside a bin (up to the
largest region's count), rows and columns weighted separately.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from schema import fb


def sample_axis(start: np.ndarray, bin_size: np.ndarray, grid: np.ndarray, k: int, bins: int, size: int
                ) -> tuple[np.ndarray, ...]:
    """Sample k of every bin along one axis, [R, bins] each: (low index, high index, low weight, high weight,
    inside mask)."""
    pos = start[:, None] + np.arange(bins)[None, :] * bin_size[:, None] + \
        ((k + 0.5) * bin_size / np.maximum(grid, 1))[:, None]
    inside = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0)
    low = pos.astype(np.int64)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    frac = np.where(at_end, 0.0, pos - low)
    return low, high, 1.0 - frac, frac, inside


@register("RoiAlign")
class RoiAlignKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, rois, index = inputs[:3]
        a = self.attrs
        if x.rank != 4 or rois.rank != 2 or rois.shape[1] != 4 or index.shape != (rois.shape[0],):
            raise self.error(f"x {list(x.shape)} (channels last), rois {list(rois.shape)} and batch_indices "
                             f"{list(index.shape)} must be [N, H, W, C], [R, 4] and [R]")
        if x.dtype.kind != "f" or index.dtype.kind not in "iu":
            raise self.error(f"x must be float and batch_indices integers, got {x.dtype} and {index.dtype}")
        if a.output_height < 1 or a.output_width < 1 or a.sampling_ratio < 0 or a.mode not in (
                fb.PoolMode.MAX, fb.PoolMode.AVG):
            raise self.error(f"output_height {a.output_height} and output_width {a.output_width} must be "
                             f"positive, sampling_ratio {a.sampling_ratio} non-negative, mode max or avg",
                             InvalidOpAttrError)
        batch = index.value
        if batch is not None and batch.size and not 0 <= batch.min() <= batch.max() < x.shape[0]:
            raise self.error(f"batch_indices {batch.tolist()} fall outside the batch of {x.shape[0]}")
        return [TensorSpec((rois.shape[0], a.output_height, a.output_width, x.shape[3]), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, rois, batch = inputs[0], inputs[1].astype(np.float64), inputs[2].astype(np.int64)
        out, a = outputs[0], self.attrs
        _, h, w, _ = x.shape
        oh, ow = a.output_height, a.output_width
        shift = 0.5 if a.half_pixel else 0.0
        x1, y1, x2, y2 = (rois[:, k] * a.spatial_scale - shift for k in range(4))
        roi_w, roi_h = x2 - x1, y2 - y1
        if not a.half_pixel:
            roi_w, roi_h = np.maximum(roi_w, 1.0), np.maximum(roi_h, 1.0)
        bin_h, bin_w = roi_h / oh, roi_w / ow
        grid_h, grid_w = ((np.full(len(rois), a.sampling_ratio) if a.sampling_ratio else np.ceil(size / n))
                          .astype(np.int64) for size, n in ((roi_h, oh), (roi_w, ow)))
        average = a.mode == fb.PoolMode.AVG
        acc = np.zeros(out.shape) if average else np.full(out.shape, -np.inf)
        b = batch[:, None, None]
        for iy in range(int(grid_h.max(initial=0))):
            ylo, yhi, wylo, wyhi, yin = sample_axis(y1, bin_h, grid_h, iy, oh, h)
            for ix in range(int(grid_w.max(initial=0))):
                xlo, xhi, wxlo, wxhi, xin = sample_axis(x1, bin_w, grid_w, ix, ow, w)
                live = ((iy < grid_h) & (ix < grid_w))[:, None, None, None]
                inside = (yin[:, :, None] & xin[:, None, :])[..., None]
                corners = [(ylo, xlo, wylo, wxlo), (ylo, xhi, wylo, wxhi), (yhi, xlo, wyhi, wxlo),
                           (yhi, xhi, wyhi, wxhi)]
                terms = [np.where(inside, (wy[:, :, None] * wx[:, None, :])[..., None]
                                  * x[b, yy[:, :, None], xx[:, None, :]], 0) for yy, xx, wy, wx in corners]
                if average:
                    acc += np.where(live, sum(terms), 0)
                else:
                    acc = np.where(live, np.maximum(acc, np.maximum.reduce(terms)), acc)
        if average:
            acc /= np.maximum(grid_h * grid_w, 1)[:, None, None, None]
        else:
            acc[np.isneginf(acc)] = 0
        np.copyto(out, acc, casting="unsafe")
