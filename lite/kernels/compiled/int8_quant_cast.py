"""The compiled sibling of QuantDTypeCast with one scale and zero point (the tensor's params, or constant
one-element inputs of the general form, as the integer form of an onnxruntime QDQ layer centres and requantizes
with scale 1): quantizing float32 into 8- or 16-bit integers (whose bounds float32 holds exactly) is one
threaded pass (`int8.quantize`, or `int8.quantize_away` with MindSpore Lite's rounding), and so is dequantizing
8-bit integers to float32 (`int8.dequantize`)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite import dtypes
from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.int8.quant_cast import QuantDTypeCastKernel
from lite.kernels.int8.requantize import NNACL


def one_value(spec: TensorSpec | None, default: float) -> np.float32 | None:
    """A constant one-element input as a float32 scalar (`default` when the input is absent), else None."""
    if spec is None:
        return np.float32(default)
    return np.float32(spec.value.ravel()[0]) if spec.value is not None and spec.value.size == 1 else None


@register("QuantDTypeCast", DataType.FLOAT32, DataType.INT8, DataType.UINT8, backend="compiled")
@register("QuantDTypeCast", DataType.INT8, DataType.UINT8, quantized=True, backend="compiled")
class QuantDTypeCastCompiled(CompiledCall, QuantDTypeCastKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        if self.given:
            self.scalars = (one_value(inputs[1], 1.0), one_value(inputs[2] if len(inputs) > 2 else None, 0.0))
        else:
            self.scalars = (np.float32(self.scale.ravel()[0]), np.float32(self.zero_point.ravel()[0])) \
                if self.scale.size == 1 else (None, None)
        out = dtypes.to_numpy(self.attrs.dst_t)
        self.compiled = None not in self.scalars and (
            self.quantizing and inputs[0].dtype == np.float32 and out in (np.int8, np.uint8, np.int16, np.uint16)
            or not self.quantizing and inputs[0].dtype in (np.int8, np.uint8) and out == np.float32)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import int8
        x, out = inputs[0].reshape(-1), outputs[0].reshape(-1)
        scale, zero_point = self.scalars
        if not self.quantizing:
            return int8.dequantize.bind(len(out), x, scale, zero_point, out)
        lo, hi = (np.float32(v) for v in self.bounds)
        if self.node.rounding == NNACL:
            return int8.quantize_away.bind(len(out), x, np.float32(1) / scale, zero_point, lo, hi, out)
        return int8.quantize.bind(len(out), x, scale, zero_point, lo, hi, out)
