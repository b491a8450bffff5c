"""DropoutGrad: the gradient of a training Dropout."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register


@register("DropoutGrad", DataType.FLOAT32)
class DropoutGradKernel(Kernel):
    """inputs: dy, mask (the training Dropout's second output, already scaled by 1 / (1 - ratio)) -> dx = dy * mask.
    """
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, mask = inputs[:2]
        if dy.shape != mask.shape:
            raise self.error(f"dy {list(dy.shape)} and mask {list(mask.shape)} differ in shape")
        return [TensorSpec(dy.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.multiply(inputs[0], inputs[1], out=outputs[0])
