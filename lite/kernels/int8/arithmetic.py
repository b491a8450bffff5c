"""int8 Add and Mul with numpy broadcasting, TFLite's integer schemes (docs/quantization.md).

Add: both inputs, centred and shifted left by 20 bits, are rescaled to a common scale 2 * max(s_a, s_b) with
integer multipliers, summed, then rescaled to the output. Mul: the product of the centred inputs is rescaled by
s_a * s_b / s_y. Fused RELU / RELU6 are clamps.
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.int8.common import Quant, fused_bounds, input_quant, output_quant
from lite.kernels.int8.requantize import Requantizer, multiply_by_quantized_multiplier, quantize_multiplier

ADD_LEFT_SHIFT = 20


class BinaryInt8Kernel(Kernel):
    """Shared shape rule and output stage; subclasses prepare multipliers and compute the int64 accumulator."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a, b = inputs[0], inputs[1]
        if b.dtype != a.dtype:
            raise self.error(f"input b is {b.dtype}, input a is {a.dtype}")
        try:
            shape = np.broadcast_shapes(a.shape, b.shape)
        except ValueError:
            raise self.error(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
        qa, qb, qy = input_quant(self, a, "input a"), input_quant(self, b, "input b"), output_quant(self, a.dtype)
        self.zp_a, self.zp_b = np.int64(qa.zero_point), np.int64(qb.zero_point)
        lo, hi = fused_bounds(self, self.attrs.activation, qy)
        self.prepare(qa, qb, qy, lo, hi)
        return [TensorSpec(shape, a.dtype)]

    @abstractmethod
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        """Precompute the multipliers and `self.requantize` from the three tensors' params."""

    def centred(self, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        return (np.subtract(inputs[0], self.zp_a, dtype=np.int64),
                np.subtract(inputs[1], self.zp_b, dtype=np.int64))


@register("Add", DataType.INT8)
class AddInt8Kernel(BinaryInt8Kernel):
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        twice_max = 2 * max(qa.scale, qb.scale)
        self.ma, self.mb = quantize_multiplier(qa.scale / twice_max), quantize_multiplier(qb.scale / twice_max)
        self.requantize = Requantizer.build(twice_max / ((1 << ADD_LEFT_SHIFT) * qy.scale), qy.zero_point, lo, hi)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        a, b = self.centred(inputs)
        a <<= ADD_LEFT_SHIFT
        b <<= ADD_LEFT_SHIFT
        total = multiply_by_quantized_multiplier(a, *self.ma) + multiply_by_quantized_multiplier(b, *self.mb)
        self.requantize(total, outputs[0])


@register("Mul", DataType.INT8)
class MulInt8Kernel(BinaryInt8Kernel):
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        self.requantize = Requantizer.build(qa.scale * qb.scale / qy.scale, qy.zero_point, lo, hi)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        a, b = self.centred(inputs)
        self.requantize(a * b, outputs[0])
