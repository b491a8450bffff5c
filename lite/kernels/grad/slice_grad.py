"""SliceGrad: the gradient of Slice, dy placed where the slice came from (the slice index of the forward).
It reuses its forward kernel's compile-time rule, so the gradient cannot disagree with the forward on which
elements went where."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.slice import SliceKernel


@register("SliceGrad", DataType.FLOAT32)
class SliceGradKernel(SliceKernel):
    """inputs: dy, x, starts, ends, axes?, steps? (the forward's inputs after dy) -> dx: zeros, with dy written
    back where Slice read it."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        sliced = super().infer(inputs[1:])[0]       # sets self.index
        if sliced.shape != dy.shape:
            raise self.error(f"dy {list(dy.shape)} is not the shape {list(sliced.shape)} Slice produces")
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        outputs[0].fill(0)
        outputs[0][self.index] = inputs[0]
