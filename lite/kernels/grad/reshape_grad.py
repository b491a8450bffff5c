"""ReshapeGrad: the gradient of Reshape, Flatten, Squeeze and Unsqueeze (dy in the input's shape)."""
from __future__ import annotations

from typing import Sequence


from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.reshape import NewShapeKernel


@register("ReshapeGrad", DataType.FLOAT32)
class ReshapeGradKernel(NewShapeKernel):
    """inputs: dy, x (the forward input) -> dx: dy's elements in x's shape (Reshape, Flatten, Squeeze, Unsqueeze).
    Computed in place when the planner allows."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        return inputs[1].shape
