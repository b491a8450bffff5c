"""int8 Add and Mul with numpy broadcasting, TFLite's integer schemes (docs/quantization.md).

Add: both inputs, centred and shifted left by 20 bits, are rescaled to a common scale 2 * max(s_a, s_b) with
integer multipliers, summed, then rescaled to the output. Mul: the product of the centred inputs is rescaled by
s_a * s_b / s_y. Fused RELU / RELU6 are clamps. Each rescaling rounds by the node's rule (`requantize.py`: TFLite's
single rounding, or MindSpore Lite's two).

An int8 output depends only on the pair of int8 inputs, so `infer` runs that integer arithmetic once over all
256 x 256 pairs into a 64 KiB table, and a run is one gather: out = table[a_byte * 256 + b_byte] (bit-exact by
construction, ~70x faster than the int64 passes); the compiled siblings run it as one fused pass for inputs of
one shape.
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
        grid = np.arange(-128, 128, dtype=np.int64)
        self.table = np.empty((256, 256), np.int8)
        self.compute(grid[:, None], grid[None, :], self.table)
        self.table = np.ascontiguousarray(np.roll(self.table, (-128, -128), axis=(0, 1))).ravel()  # by byte
        self.shape = shape
        return [TensorSpec(shape, a.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shape, np.dtype(np.uint16))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.index = scratch[0]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.left_shift(inputs[0].view(np.uint8), 8, out=self.index, dtype=np.uint16)
        self.index |= inputs[1].view(np.uint8)
        np.take(self.table, self.index, out=outputs[0], mode="clip")      # every index is in range: no checks

    @abstractmethod
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        """Precompute the multipliers and `self.requantize` from the three tensors' params."""

    @abstractmethod
    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        """The integer arithmetic on int64 input values (broadcasting), written into `out`."""


@register("Add", DataType.INT8, quantized=True)
class AddInt8Kernel(BinaryInt8Kernel):
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        twice_max = 2 * max(qa.scale, qb.scale)
        self.ma, self.mb = quantize_multiplier(qa.scale / twice_max), quantize_multiplier(qb.scale / twice_max)
        self.requantize = Requantizer.build(twice_max / ((1 << ADD_LEFT_SHIFT) * qy.scale), qy.zero_point, lo, hi,
                                            rounding=self.node.rounding)

    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        a, b = (a - self.zp_a) << ADD_LEFT_SHIFT, (b - self.zp_b) << ADD_LEFT_SHIFT
        rule = self.node.rounding
        total = (multiply_by_quantized_multiplier(a, *self.ma, rule)
                 + multiply_by_quantized_multiplier(b, *self.mb, rule))
        self.requantize(total, out)


@register("Mul", DataType.INT8, quantized=True)
class MulInt8Kernel(BinaryInt8Kernel):
    def prepare(self, qa: Quant, qb: Quant, qy: Quant, lo: int, hi: int) -> None:
        self.requantize = Requantizer.build(qa.scale * qb.scale / qy.scale, qy.zero_point, lo, hi)

    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self.requantize((a - self.zp_a) * (b - self.zp_b), out)
