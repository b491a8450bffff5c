"""Softmax and LogSoftmax along one axis (ONNX opset >= 13 semantics; the importer lowers the older
coerce-to-2-D form onto this). Both subtract the axis maximum first, so large inputs do not overflow."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from lite.traits import AXIS, Layout, declare


def softmax(x: np.ndarray, axis: int, out: np.ndarray) -> None:
    np.subtract(x, x.max(axis=axis, keepdims=True), out=out)
    np.exp(out, out=out)
    out /= out.sum(axis=axis, keepdims=True)


def log_softmax(x: np.ndarray, axis: int, out: np.ndarray) -> None:
    """x - max - log(sum(exp(x - max))), with `out` as the exp buffer (no full-size temporary)."""
    peak = x.max(axis=axis, keepdims=True)
    np.subtract(x, peak, out=out)
    np.exp(out, out=out)
    shift = peak + np.log(out.sum(axis=axis, keepdims=True))
    np.subtract(x, shift, out=out)


class _AxisKernel(Kernel):
    """Shared shape rule; subclasses name the math."""
    float16_compute = True
    function = staticmethod(softmax)

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        self.axis = self.attrs.axis % x.rank
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.function(inputs[0], self.axis, outputs[0])


declare("Softmax", "LogSoftmax", layout=Layout(AXIS, axis_default=-1))


@register("Softmax", DataType.FLOAT32, DataType.FLOAT64)
class SoftmaxKernel(_AxisKernel):
    inplace = True          # reads x only before the first write
    function = staticmethod(softmax)


@register("LogSoftmax", DataType.FLOAT32, DataType.FLOAT64)
class LogSoftmaxKernel(_AxisKernel):
    function = staticmethod(log_softmax)
