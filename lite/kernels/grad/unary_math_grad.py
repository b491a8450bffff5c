"""UnaryMathGrad: dx = dy * f'(x) from the forward input; the step functions (floor, ceil, round, sign) have
derivative 0 everywhere, as in PyTorch."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import NotSupportedError
from schema import fb

U = fb.UnaryMathMode
Slope = Callable[[np.ndarray, np.ndarray], None]      # (x, out): out = f'(x)


def _zero(x: np.ndarray, out: np.ndarray) -> None:
    out.fill(0.0)


def _inverse_root(sign: float, offset: float, x_sign: float) -> Slope:
    """sign / sqrt(offset + x_sign * x^2): the derivatives of asin, acos, asinh and acosh."""
    def slope(x: np.ndarray, out: np.ndarray) -> None:
        np.square(x, out=out)
        out *= x_sign
        out += offset
        np.sqrt(out, out=out)
        np.divide(sign, out, out=out)
    return slope


def _inverse_quadratic(x_sign: float) -> Slope:
    """1 / (1 + x_sign * x^2): the derivatives of atan and atanh."""
    def slope(x: np.ndarray, out: np.ndarray) -> None:
        np.square(x, out=out)
        out *= x_sign
        out += 1.0
        np.reciprocal(out, out=out)
    return slope


def _tan(x: np.ndarray, out: np.ndarray) -> None:
    np.tan(x, out=out)
    np.square(out, out=out)
    out += 1.0


def _reciprocal(x: np.ndarray, out: np.ndarray) -> None:
    np.square(x, out=out)
    np.divide(-1.0, out, out=out)


SLOPES: dict[int, Slope] = {
    U.FLOOR: _zero, U.CEIL: _zero, U.ROUND: _zero, U.SIGN: _zero, U.RECIPROCAL: _reciprocal,
    U.SIN: lambda x, out: np.cos(x, out=out), U.COS: lambda x, out: np.negative(np.sin(x, out=out), out=out),
    U.TAN: _tan, U.ASIN: _inverse_root(1.0, 1.0, -1.0), U.ACOS: _inverse_root(-1.0, 1.0, -1.0),
    U.ATAN: _inverse_quadratic(1.0), U.SINH: lambda x, out: np.cosh(x, out=out),
    U.COSH: lambda x, out: np.sinh(x, out=out), U.ASINH: _inverse_root(1.0, 1.0, 1.0),
    U.ACOSH: _inverse_root(1.0, -1.0, 1.0), U.ATANH: _inverse_quadratic(-1.0),
}


@register("UnaryMathGrad", DataType.FLOAT32)
class UnaryMathGradKernel(Kernel):
    """inputs: dy, x (the forward input, same shape) -> dx = dy * f'(x)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        if self.attrs.mode not in SLOPES:
            raise self.error(f"unary math mode {self.attrs.mode} has no gradient", NotSupportedError)
        if dy.shape != x.shape:
            raise self.error(f"dy {list(dy.shape)} and x {list(x.shape)} differ in shape")
        self.slope = SLOPES[self.attrs.mode]
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.slope(inputs[1], outputs[0])
        outputs[0] *= inputs[0]
