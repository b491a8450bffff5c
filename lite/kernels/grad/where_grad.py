"""WhereGrad: dy goes to x where the condition holds and to y elsewhere, each summed over the dims it was
broadcast along."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to


@register("WhereGrad", DataType.FLOAT32)
class WhereGradKernel(Kernel):
    """inputs: dy (the broadcast shape), condition, x, y -> dx (x's shape), dy (y's shape)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, cond, x, y = inputs[:4]
        if tuple(np.broadcast_shapes(cond.shape, x.shape, y.shape)) != dy.shape:
            raise self.error(f"dy {list(dy.shape)} is not the broadcast of {[list(t.shape) for t in (cond, x, y)]}")
        self.axes = [broadcast_axes(x.shape, dy.shape), broadcast_axes(y.shape, dy.shape)]
        self.work_shape = dy.shape
        return [TensorSpec(x.shape, dy.dtype), TensorSpec(y.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.work_shape, np.dtype(np.float32))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, cond = inputs[:2]
        routed = self.work[0]
        for out, axes, taken in zip(outputs, self.axes, (cond, ~cond)):
            np.multiply(dy, taken, out=routed)
            if axes:
                sum_to(routed, axes, out)
            else:
                np.copyto(out, routed.reshape(out.shape))
