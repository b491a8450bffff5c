"""UnaryMath: floor, ceil, round (half to even), reciprocal, sign and the trigonometric and hyperbolic
functions and their inverses (ONNX Floor ... Atanh), each one numpy ufunc written into the output."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.unary import UnaryKernel
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare
from schema import fb

U = fb.UnaryMathMode
UFUNCS: dict[int, np.ufunc] = {
    U.FLOOR: np.floor, U.CEIL: np.ceil, U.ROUND: np.rint, U.RECIPROCAL: np.reciprocal, U.SIGN: np.sign,
    U.SIN: np.sin, U.COS: np.cos, U.TAN: np.tan, U.ASIN: np.arcsin, U.ACOS: np.arccos, U.ATAN: np.arctan,
    U.SINH: np.sinh, U.COSH: np.cosh, U.ASINH: np.arcsinh, U.ACOSH: np.arccosh, U.ATANH: np.arctanh,
}


declare("UnaryMath", layout=Layout(ELEMENTWISE))


@register("UnaryMath")
class UnaryMathKernel(UnaryKernel):
    """Float tensors; SIGN also takes integer tensors."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        mode, x = self.attrs.mode, inputs[0]
        if mode not in UFUNCS:
            raise self.error(f"unary math mode {mode} is not one of {sorted(UFUNCS)}", NotSupportedError)
        if x.dtype.kind not in ("iuf" if mode == U.SIGN else "f"):
            raise self.error(f"{x.dtype} tensors are not supported", NotSupportedError)
        ufunc = UFUNCS[mode]
        self.fn = lambda a, out: ufunc(a, out=out)
        return [TensorSpec(x.shape, x.dtype)]
