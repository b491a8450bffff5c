"""Bitwise: AND, OR, XOR (binary, numpy broadcasting), NOT (unary) and SHIFT_LEFT / SHIFT_RIGHT on integer
tensors (ONNX BitwiseAnd/Or/Xor/Not, BitShift); on bool tensors AND, OR, XOR and NOT are ONNX's And, Or, Xor
and Not. Shifting by the width of the type or more gives 0 (numpy's rule; C leaves it undefined)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.arithmetic import Binary, BinaryKernel
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare
from schema import fb

B = fb.BitwiseMode
_BINARY = {B.AND: np.bitwise_and, B.OR: np.bitwise_or, B.XOR: np.bitwise_xor, B.SHIFT_LEFT: np.left_shift,
           B.SHIFT_RIGHT: np.right_shift}
_SHIFTS = (B.SHIFT_LEFT, B.SHIFT_RIGHT)


declare("Bitwise", layout=Layout(ELEMENTWISE))


@register("Bitwise")
class BitwiseKernel(BinaryKernel):
    kinds = "biu"

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        mode, x = self.attrs.mode, inputs[0]
        if mode != B.NOT and mode not in _BINARY:
            raise self.error(f"bitwise mode {mode} is not one of {sorted([B.NOT, *_BINARY])}", NotSupportedError)
        if mode in _SHIFTS and x.dtype.kind == "b":
            raise self.error("bool tensors cannot be shifted", NotSupportedError)
        if mode != B.NOT:
            return super().infer(inputs)
        if x.dtype.kind not in self.kinds:
            raise self.error(f"{x.dtype} operands are not supported", NotSupportedError)
        self.activation, self.compute = None, lambda a, _, out: np.invert(a, out=out)
        return [TensorSpec(x.shape, x.dtype)]

    def specialise(self, a: TensorSpec, b: TensorSpec) -> Binary:
        ufunc = _BINARY[self.attrs.mode]
        return lambda x, y, out: ufunc(x, y, out=out)

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        self.compute(inputs[0], inputs[1] if len(inputs) > 1 else None, outputs[0])
