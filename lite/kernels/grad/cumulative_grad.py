"""CumProdGrad: the gradient of a running product, exact where x has zeros (where dividing y by x is not).

For the inclusive forward y_j = prod_{k<=j} x_k: dx_i = sum_{j>=i} dy_j * prod_{k<=j, k!=i} x_k. Before the
first zero z of a line that is revcumsum(dy * y)_i / x_i; at z it is revcumsum(dy * y')_z with x_z replaced by
1 in y'; after z every product holds x_z = 0. Reversal and exclusion are views, as in the forward kernel."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.cumulative import AlongAxis


def reverse_cumsum(a: np.ndarray, axis: int) -> np.ndarray:
    return np.flip(np.cumsum(np.flip(a, axis), axis), axis)


def cumprod_grad(dy: np.ndarray, x: np.ndarray, axis: int, dx: np.ndarray) -> None:
    """dx of the inclusive running product of x along `axis`, for the upstream gradient dy."""
    alive = np.logical_and.accumulate(x != 0, axis=axis)             # no zero up to and including i
    before = np.concatenate([np.ones_like(np.take(alive, [0], axis)), np.delete(alive, -1, axis)], axis)
    first_zero = before & ~alive
    with np.errstate(divide="ignore", invalid="ignore"):
        np.divide(reverse_cumsum(dy * np.cumprod(x, axis), axis), np.where(alive, x, 1), out=dx)
    dx[~alive] = 0
    if first_zero.any():
        at_zero = reverse_cumsum(dy * np.cumprod(np.where(first_zero, 1, x), axis), axis)
        dx[first_zero] = at_zero[first_zero]


@register("CumProdGrad", DataType.FLOAT32)
class CumProdGradKernel(AlongAxis):
    """inputs: dy, x, axis -> dx (x's shape)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[:2]
        if dy.shape != x.shape:
            raise self.error(f"dy {list(dy.shape)} and x {list(x.shape)} differ")
        self.read_axis(x, inputs[2])
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x, dx = inputs[0], inputs[1], outputs[0]
        if self.attrs.reverse:
            dy, x, dx = (np.flip(a, self.axis) for a in (dy, x, dx))
        if self.attrs.exclusive:            # y[1:] is the inclusive product of x[:-1]; x[-1] reaches no output
            self._along(dx, slice(-1, None))[...] = 0
            dy, x, dx = self._along(dy, slice(1, None)), self._along(x, slice(0, -1)), self._along(dx, slice(0, -1))
        cumprod_grad(dy, x, self.axis, dx)
