"""AffineGrid: the sampling grid of GridSample for affine matrices theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D) and
an output size [N, C, (D,) H, W] known at compile time; output [N, (D,) H, W, 2 or 3] holding (x, y(, z)) =
theta @ (x, y(, z), 1) over the normalised pixel centres (-1 and 1 at the edge centres with align_corners,
else at the outer edges). One matmul against the base grid.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register


def base_grid(spatial: Sequence[int], align_corners: bool) -> np.ndarray:
    """[*spatial, rank + 1] homogeneous coordinates (x, y(, z), 1): x runs along the last axis."""
    def ticks(n: int) -> np.ndarray:
        if align_corners:
            return np.linspace(-1, 1, n) if n > 1 else np.zeros(1)
        return (2 * np.arange(n) + 1) / n - 1
    mesh = np.meshgrid(*(ticks(n) for n in spatial), indexing="ij")        # (D,) H, W order
    return np.stack([*mesh[::-1], np.ones(tuple(spatial))], axis=-1)


@register("AffineGrid")
class AffineGridKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        theta = inputs[0]
        size = self.known(inputs[1], "size").astype(np.int64).ravel()
        rank = size.size - 2
        if rank not in (2, 3) or theta.shape != (size[0], rank, rank + 1) or size.min() < 1:
            raise self.error(f"theta {list(theta.shape)} and size {size.tolist()} must be [N, 2, 3] and "
                             f"[N, C, H, W], or [N, 3, 4] and [N, C, D, H, W]")
        if theta.dtype.kind != "f":
            raise self.error(f"theta must be float, got {theta.dtype}")
        spatial = tuple(int(d) for d in size[2:])
        self.base = base_grid(spatial, bool(self.attrs.align_corners)).reshape(-1, rank + 1).astype(theta.dtype)
        return [TensorSpec((int(size[0]), *spatial, rank), theta.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out = outputs[0]
        np.matmul(self.base, inputs[0].transpose(0, 2, 1), out=out.reshape(out.shape[0], -1, out.shape[-1]))
