"""DynamicQuantizeLinear: float32 -> uint8 with a scale and zero point computed from the tensor itself
(ONNX DynamicQuantizeLinear): the range [min(x, 0), max(x, 0)] maps onto [0, 255], rounding half to even."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register

QMAX = 255.0


@register("DynamicQuantizeLinear", DataType.FLOAT32)
class DynamicQuantizeLinearKernel(Kernel):
    """outputs: y (x's shape, uint8), y_scale (float32 scalar), y_zero_point (uint8 scalar)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        return [TensorSpec(inputs[0].shape, np.dtype(np.uint8)), TensorSpec((), np.dtype(np.float32)),
                TensorSpec((), np.dtype(np.uint8))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        high = np.float32(max(0.0, x.max(initial=0.0)))
        low = np.float32(min(0.0, x.min(initial=0.0)))
        scale = np.float32((high - low) if high != low else 1.0) / np.float32(QMAX)
        zero_point = np.rint(np.clip(-low / scale, 0.0, QMAX))
        q = np.divide(x, scale)
        np.rint(q, out=q)
        q += zero_point
        np.clip(q, 0.0, QMAX, out=q)
        np.copyto(outputs[0], q, casting="unsafe")
        outputs[1][()] = scale
        outputs[2][()] = zero_point
