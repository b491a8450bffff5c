"""The compiled sibling of QuantDTypeCast on float32 input: quantizing with one scale into a type of at most 16
bits (whose bounds float32 holds exactly) is one threaded pass (`int8.quantize`, or `int8.quantize_away` with
MindSpore Lite's rounding)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite import dtypes
from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.int8.quant_cast import QuantDTypeCastKernel
from lite.kernels.int8.requantize import NNACL


@register("QuantDTypeCast", DataType.FLOAT32, backend="compiled")
class QuantDTypeCastCompiled(CompiledCall, QuantDTypeCastKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = (not self.given and self.quantizing and self.scale.size == 1
                         and inputs[0].dtype == np.float32 and dtypes.to_numpy(self.attrs.dst_t).itemsize <= 2)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import int8
        lo, hi = (np.float32(v) for v in self.bounds)
        x, out = inputs[0].reshape(-1), outputs[0].reshape(-1)
        scale, zero_point = np.float32(self.scale.ravel()[0]), np.float32(self.zero_point.ravel()[0])
        if self.node.rounding == NNACL:
            return int8.quantize_away.bind(len(out), x, np.float32(1) / scale, zero_point, lo, hi, out)
        return int8.quantize.bind(len(out), x, scale, zero_point, lo, hi, out)
