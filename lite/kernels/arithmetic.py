"""Binary elementwise ops with numpy broadcasting: Add, Sub, Mul, Div (with a fused activation), Pow, Minimum,
Maximum.

Every numeric dtype is served by the same kernels: float32 for the model's math, int32/int64 for the shape
computations the converter folds through them. Integer Div truncates toward zero (C and ONNX), not floor.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.activation import activation_fn
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare

Binary = Callable[[np.ndarray, np.ndarray, np.ndarray], None]


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """numpy's broadcast of two shapes, or None when they do not broadcast."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def divide(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """a / b; integers truncate toward zero. `out` may be `a`."""
    if out.dtype.kind == "f":
        np.divide(a, b, out=out)
        return
    # numpy floors; a quotient with a remainder and operands of opposite signs is one too low
    round_up = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    np.floor_divide(a, b, out=out)
    out += round_up


def power(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
    """a ** b in the base's dtype. Mixed or integer operands are computed in float64 and cast back, like C's
    pow: int64 base with float exponent, float32 base with int exponent, negative integer exponents."""
    if a.dtype == b.dtype and a.dtype.kind == "f":
        np.power(a, b, out=out)
    else:
        np.power(a, b, out=out, dtype=np.float64, casting="unsafe")


def _scalar_power(exponent: float) -> Binary | None:
    """A fast form of x ** exponent for the exponents models use most (np.power is 3-15x slower)."""
    fast: dict[float, Binary] = {
        1.0: lambda a, b, out: np.copyto(out, a),
        2.0: lambda a, b, out: np.multiply(a, a, out=out),
        0.5: lambda a, b, out: np.sqrt(a, out=out),
        -1.0: lambda a, b, out: np.reciprocal(a, out=out),
    }
    return fast.get(exponent)


class BinaryKernel(Kernel):
    """y = fn(a, b) with numpy broadcasting; a and b share one numeric dtype, y has it too.
    Output 0 may share a's memory (when a has y's shape)."""
    float16_compute = True
    inplace = True
    fn: Binary
    same_dtype = True
    kinds = "iuf"            # the numpy dtype kinds the operands may have

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a, b = inputs[0], inputs[1] if len(inputs) > 1 else None
        if b is None:
            raise self.error("the second operand is missing")
        for spec in (a, b):
            if spec.dtype.kind not in self.kinds:
                raise self.error(f"{spec.dtype} operands are not supported", NotSupportedError)
        if self.same_dtype and a.dtype != b.dtype:
            raise self.error(f"operands have different dtypes ({a.dtype} and {b.dtype})")
        shape = broadcast_shape(a.shape, b.shape)
        if shape is None:
            raise self.error(f"shapes {a.shape} and {b.shape} do not broadcast")
        self.activation = activation_fn(getattr(self.attrs, "activation", 0))
        self.compute = self.specialise(a, b) or self.fn
        return [TensorSpec(shape, self.result_dtype(a))]

    def specialise(self, a: TensorSpec, b: TensorSpec) -> Binary | None:
        """A faster `fn` for what compile time knows of the operands, or None."""
        return None

    def result_dtype(self, a: TensorSpec) -> np.dtype:
        return a.dtype

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out = outputs[0]
        self.compute(inputs[0], inputs[1], out)
        if self.activation is not None:
            self.activation(out, out)


declare("Add", "Sub", "Mul", "Div", layout=Layout(ELEMENTWISE), fused_activation=True)
declare("Minimum", "Maximum", "Pow", layout=Layout(ELEMENTWISE))


@register("Add")
class AddKernel(BinaryKernel):
    fn = staticmethod(lambda a, b, out: np.add(a, b, out=out))


@register("Sub")
class SubKernel(BinaryKernel):
    fn = staticmethod(lambda a, b, out: np.subtract(a, b, out=out))


@register("Mul")
class MulKernel(BinaryKernel):
    fn = staticmethod(lambda a, b, out: np.multiply(a, b, out=out))


@register("Div")
class DivKernel(BinaryKernel):
    fn = staticmethod(divide)


@register("Minimum")
class MinimumKernel(BinaryKernel):
    fn = staticmethod(lambda a, b, out: np.minimum(a, b, out=out))


@register("Maximum")
class MaximumKernel(BinaryKernel):
    fn = staticmethod(lambda a, b, out: np.maximum(a, b, out=out))


@register("Pow")
class PowKernel(BinaryKernel):
    """y = a ** b; the exponent may have another numeric dtype than the base (y has the base's)."""
    fn = staticmethod(power)
    same_dtype = False

    def specialise(self, a: TensorSpec, b: TensorSpec) -> Binary | None:
        """A constant exponent of a float base: a fast form for common scalars, else cast once to the base's
        dtype (a float32 power loop instead of a float64 one)."""
        if a.dtype.kind != "f" or b.value is None:
            return None
        fast = _scalar_power(float(b.value.reshape(-1)[0])) if b.value.size == 1 and b.rank <= a.rank else None
        exponent = None if fast else b.value.astype(a.dtype)
        return fast or (lambda x, _, out: np.power(x, exponent, out=out))
