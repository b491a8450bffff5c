"""Where: y = x where condition else y, with the three inputs broadcast together (numpy / ONNX rules).

Two masked copies into the output (`np.copyto` broadcasts both the source and the mask): no temporary."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare


declare("Where", layout=Layout(ELEMENTWISE))


@register("Where")
class WhereKernel(Kernel):
    """inputs: condition (bool), x, y (one dtype); output: the broadcast shape, x's dtype."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        if len(inputs) != 3 or any(s is None for s in inputs):
            raise self.error("needs three inputs: condition, x, y")
        cond, x, y = inputs
        if cond.dtype != np.bool_:
            raise self.error(f"the condition must be bool, got {cond.dtype}", NotSupportedError)
        if x.dtype != y.dtype:
            raise self.error(f"x and y have different dtypes ({x.dtype} and {y.dtype})")
        try:
            shape = tuple(np.broadcast_shapes(cond.shape, x.shape, y.shape))
        except ValueError:
            raise self.error(f"shapes {cond.shape}, {x.shape} and {y.shape} do not broadcast") from None
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        cond, x, y = inputs
        np.copyto(outputs[0], y)
        np.copyto(outputs[0], x, where=cond)
