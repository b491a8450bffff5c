"""GridSampleGrad: dy [N, *out, C], x [N, *spatial, C] (channels last), grid -> dx, dgrid.

Through the same taps as the forward (`grid_taps`): each tap scatter-adds weight * dy into its x row (dx) and adds
<x row, dy> times d(weight)/d(grid) to dgrid (zero for nearest sampling and where border padding clamps the
coordinate; reflection flips its sign).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.grid_sample import check_grid_sample, grid_taps


@register("GridSampleGrad", DataType.FLOAT32)
class GridSampleGradKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, grid = inputs[:3]
        shape = check_grid_sample(self, x, grid)
        if dy.shape != shape:
            raise self.error(f"dy {list(dy.shape)} must have the sampled shape {list(shape)}")
        return [TensorSpec(x.shape, x.dtype), TensorSpec(grid.shape, grid.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x, grid = inputs[:3]
        dx, dgrid = outputs
        a, c = self.attrs, x.shape[-1]
        rows, dx_rows, dy_rows = x.reshape(-1, c), dx.reshape(-1, c), dy.reshape(-1, c)
        dx.fill(0)
        dgrid.fill(0)
        for flat, weight, slopes in grid_taps(grid, x.shape[1:-1], a.mode, a.padding_mode, bool(a.align_corners),
                                              slopes=True):
            np.add.at(dx_rows, flat.ravel(), dy_rows * weight.reshape(-1, 1))
            inner = np.einsum("...c,...c->...", rows[flat], dy)
            for k, slope in enumerate(slopes):
                dgrid[..., k] += slope * inner
