"""Gradients of the softmax ops: SoftmaxGrad and LogSoftmaxGrad, along the forward's axis."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


class _AxisGradKernel(Kernel):
    """inputs: dy, y (the forward output) along `axis` -> dx; both viewed as [A, K, B] with K the axis."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, y = inputs[:2]
        if not -y.rank <= self.attrs.axis < y.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {y.rank}", InvalidOpAttrError)
        if dy.shape != y.shape:
            raise self.error(f"dy {list(dy.shape)} and y {list(y.shape)} differ in shape")
        axis = self.attrs.axis % y.rank
        self.view = (int(np.prod(y.shape[:axis], dtype=np.int64)), y.shape[axis], -1)
        self.sum_shape = (self.view[0], int(np.prod(y.shape[axis + 1:], dtype=np.int64)))
        return [TensorSpec(y.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.sum_shape, np.dtype(np.float32))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.dy, self.y, self.dx = (t.reshape(self.view) for t in (inputs[0], inputs[1], outputs[0]))
        self.sums = scratch[0][:, None, :]


@register("SoftmaxGrad", DataType.FLOAT32)
class SoftmaxGradKernel(_AxisGradKernel):
    """dx = y * (dy - sum(dy * y) along the axis)."""

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.einsum("akb,akb->ab", self.dy, self.y, out=self.sums[:, 0, :])
        np.subtract(self.dy, self.sums, out=self.dx)
        self.dx *= self.y


@register("LogSoftmaxGrad", DataType.FLOAT32)
class LogSoftmaxGradKernel(_AxisGradKernel):
    """dx = dy - exp(y) * sum(dy) along the axis."""

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.sum(self.dy, axis=1, keepdims=True, out=self.sums)
        np.exp(self.y, out=self.dx)
        self.dx *= self.sums
        np.subtract(self.dy, self.dx, out=self.dx)
