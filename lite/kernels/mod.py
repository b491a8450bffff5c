"""Mod: the remainder of a / b with numpy broadcasting (ONNX Mod). fmod: a - trunc(a / b) * b, the sign of a
(C fmod); otherwise a - floor(a / b) * b, the sign of b (Python %; for floats since ONNX opset 28, whose special
cases of zeros and infinities are Python's too). x % 0 is NaN for floats, 0 for integers."""
from __future__ import annotations

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.arithmetic import Binary, BinaryKernel
from lite.traits import ELEMENTWISE, Layout, declare


declare("Mod", layout=Layout(ELEMENTWISE))


@register("Mod")
class ModKernel(BinaryKernel):
    def specialise(self, a: TensorSpec, b: TensorSpec) -> Binary:
        ufunc = np.fmod if self.attrs.fmod else np.remainder

        def fn(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
            with np.errstate(divide="ignore", invalid="ignore"):
                ufunc(x, y, out=out)
        return fn
