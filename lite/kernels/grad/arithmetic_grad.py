"""Gradients of the arithmetic ops: AddGrad, SubGrad, MulGrad, DivGrad, PowGrad, MaximumGrad, MinimumGrad
(dy, a, b -> da, db). float32.

A binary op broadcasts its operands to y's shape, so each operand's gradient is the full-shaped partial
derivative summed over the axes it was broadcast along and reshaped to the operand's shape; those axes are fixed
at compile time (`broadcast_axes`). Ties and singular points follow PyTorch autograd: Maximum/Minimum split dy
equally between equal operands, Pow's base gradient is 0 where the exponent is 0 and its exponent gradient is 0
where the base is 0 and the exponent non-negative, Abs' gradient is 0 at 0.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.arithmetic import broadcast_shape

# partial(dy, a, b, out): the full-shaped (y-shaped) gradient of one operand into `out`
Partial = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], None]


def broadcast_axes(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Axes of `out_shape` along which a tensor of `shape` was broadcast: the leading axes it lacks and those
    where it has size 1 and the output does not."""
    lead = len(out_shape) - len(shape)
    return tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and out_shape[lead + i] != 1)


def sum_to(g: np.ndarray, axes: tuple[int, ...], out: np.ndarray) -> None:
    """out = g summed over `axes` (from `broadcast_axes(out.shape, g.shape)`), in out's shape."""
    kept = (1,) * (g.ndim - out.ndim) + out.shape
    np.add.reduce(g, axis=axes, keepdims=True, out=out.reshape(kept))


def _product(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.multiply(dy, b, out=out)                     # d(a * b)/da = b


def _quotient_numerator(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.divide(dy, b, out=out)                       # d(a / b)/da = 1 / b


def _quotient_denominator(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.divide(dy, b, out=out)                       # d(a / b)/db = -a / b^2
    out *= a
    out /= b
    np.negative(out, out=out)


def _power_base(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = b * np.power(a, b - 1)               # d(a ** b)/da = b * a ** (b - 1)
    np.multiply(dy, np.where(b == 0, 0, slope), out=out)


def _power_exponent(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = np.power(a, b) * np.log(a)           # d(a ** b)/db = a ** b * ln a
    np.multiply(dy, np.where((a == 0) & (b >= 0), 0, slope), out=out)


def _selected(pick: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Partial:
    """The gradient of the operand `pick` selects (a > b for Maximum's a): dy where picked, dy / 2 on ties."""
    def partial(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.multiply(dy, pick(a, b) + np.float32(0.5) * (a == b), out=out)
    return partial


def _swap(fn: Partial) -> Partial:
    """The same rule for the other operand: fn with a and b exchanged."""
    return lambda dy, a, b, out: fn(dy, b, a, out)


def _identity(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.copyto(out, dy)


def _negated(dy: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    np.negative(dy, out=out)


_GREATER = _selected(np.greater)
_LESS = _selected(np.less)


class BinaryGradKernel(Kernel):
    """inputs: dy (y's shape), a, b (the forward operands, broadcasting to y) -> da (a's shape), db (b's shape).
    Subclasses give `partials`: the full-shaped gradient rule of a and of b."""
    partials: tuple[Partial, Partial]

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, a, b = inputs[:3]
        if broadcast_shape(a.shape, b.shape) != dy.shape:
            raise self.error(f"dy {list(dy.shape)} is not the broadcast of a {list(a.shape)} and b {list(b.shape)}")
        self.axes = [broadcast_axes(a.shape, dy.shape), broadcast_axes(b.shape, dy.shape)]
        self.work_shape = dy.shape
        return [TensorSpec(a.shape, dy.dtype), TensorSpec(b.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.work_shape, np.dtype(np.float32))] if any(self.axes) else []

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, a, b = inputs[:3]
        for partial, axes, out in zip(self.partials, self.axes, outputs):
            if axes:
                partial(dy, a, b, self.work[0])
                sum_to(self.work[0], axes, out)
            else:
                partial(dy, a, b, out.reshape(dy.shape))


@register("AddGrad", DataType.FLOAT32)
class AddGradKernel(BinaryGradKernel):
    partials = (_identity, _identity)


@register("SubGrad", DataType.FLOAT32)
class SubGradKernel(BinaryGradKernel):
    partials = (_identity, _negated)


@register("MulGrad", DataType.FLOAT32)
class MulGradKernel(BinaryGradKernel):
    partials = (_product, _swap(_product))


@register("DivGrad", DataType.FLOAT32)
class DivGradKernel(BinaryGradKernel):
    partials = (_quotient_numerator, _quotient_denominator)


@register("PowGrad", DataType.FLOAT32)
class PowGradKernel(BinaryGradKernel):
    partials = (_power_base, _power_exponent)


@register("MaximumGrad", DataType.FLOAT32)
class MaximumGradKernel(BinaryGradKernel):
    partials = (_GREATER, _swap(_GREATER))


@register("MinimumGrad", DataType.FLOAT32)
class MinimumGradKernel(BinaryGradKernel):
    partials = (_LESS, _swap(_LESS))
