"""PadGrad: the gradient of Pad, dy cropped by the forward's own pad placement."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.pad import crop_and_place


@register("PadGrad", DataType.FLOAT32)
class PadGradKernel(Kernel):
    """inputs: dy, x, pads ([begin..., end...], compile-time known) -> dx: the part of dy that came from x
    (constant padding); elements of x a negative pad cropped get 0."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        pads = [int(p) for p in self.known(inputs[2] if len(inputs) > 2 else None, "pads").ravel()]
        if len(pads) != 2 * x.rank:
            raise self.error(f"pads has {len(pads)} values, a rank-{x.rank} input needs {2 * x.rank}")
        begins, ends = pads[:x.rank], pads[x.rank:]
        if dy.shape != tuple(n + b + e for n, b, e in zip(x.shape, begins, ends)):
            raise self.error(f"dy {list(dy.shape)} is not x {list(x.shape)} padded by {pads}")
        self.src, self.dst = crop_and_place(x.shape, begins, ends)
        self.cropped = min(pads, default=0) < 0
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.cropped:
            outputs[0].fill(0)
        outputs[0][self.src] = inputs[0][self.dst]
