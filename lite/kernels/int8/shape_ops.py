"""int8 Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat and Pad: the dtype-generic kernels plus a
requantization where an output's params differ from its input's (y = MBQM(q - zp_x, s_x / s_y) + zp_y), and Pad
filling with the zero point (real 0) unless a constant value is given."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.concat import ConcatKernel
from lite.kernels.int8.common import input_quant, output_quant
from lite.kernels.int8.requantize import Requantizer, same_params
from lite.kernels.pad import PadKernel
from lite.kernels.reshape import FlattenKernel, ReshapeKernel, SqueezeKernel, UnsqueezeKernel
from lite.kernels.transpose import TransposeKernel
from schema import fb


def rescaler(kernel: Kernel, x: TensorSpec) -> Requantizer | None:
    """The requantization from x's params to the kernel's output params, None when they are the same."""
    if same_params(x.quant, kernel.out_quant[0]) or not kernel.out_quant[0]:
        return None
    qx, qy = input_quant(kernel, x), output_quant(kernel, x.dtype)
    return Requantizer.build(qx.scale / qy.scale, qy.zero_point, qy.lo, qy.hi, acc_bound=qx.hi - qx.lo)


def requantize_in_place(rescale: Requantizer, zero_point: int, array: np.ndarray) -> None:
    rescale(np.subtract(array, zero_point, dtype=np.int64), array)


class Requantized:
    """Mixin for a one-input data-movement kernel: move the int8 values, then rescale them when needed."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        outs = super().infer(inputs)
        self.rescale = rescaler(self, inputs[0])
        self.zp_x = int(inputs[0].quant[0].zeroPoint) if self.rescale else 0
        if self.rescale is not None:
            outs[0].value = None
        return outs

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        super().run(inputs, outputs)
        if self.rescale is not None:
            requantize_in_place(self.rescale, self.zp_x, outputs[0])


@register("Reshape", DataType.INT8, quantized=True)
class ReshapeInt8Kernel(Requantized, ReshapeKernel):
    pass


@register("Flatten", DataType.INT8, quantized=True)
class FlattenInt8Kernel(Requantized, FlattenKernel):
    pass


@register("Squeeze", DataType.INT8, quantized=True)
class SqueezeInt8Kernel(Requantized, SqueezeKernel):
    pass


@register("Unsqueeze", DataType.INT8, quantized=True)
class UnsqueezeInt8Kernel(Requantized, UnsqueezeKernel):
    pass


@register("Transpose", DataType.INT8, quantized=True)
class TransposeInt8Kernel(Requantized, TransposeKernel):
    pass


@register("Pad", DataType.INT8, quantized=True)
class PadInt8Kernel(Requantized, PadKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        outs = super().infer(inputs)
        given = len(inputs) > 2 and inputs[2] is not None
        if self.attrs.mode == fb.PaddingFill.CONSTANT and not given and inputs[0].quant:
            self.fill = np.int8(inputs[0].quant[0].zeroPoint)
        return outs


@register("Concat", DataType.INT8, quantized=True)
class ConcatInt8Kernel(ConcatKernel):
    """Inputs whose params differ from the output's are requantized into their slice of the output."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        outs = super().infer(inputs)
        self.parts = [(rescaler(self, x), int(x.quant[0].zeroPoint) if x.quant else 0) for x in inputs]
        return outs

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        super().run(inputs, outputs)
        start = 0
        for x, (rescale, zp) in zip(inputs, self.parts):
            stop = start + x.shape[self.axis]
            if rescale is not None:
                part = outputs[0][(slice(None),) * self.axis + (slice(start, stop),)]
                rescale(np.subtract(x, zp, dtype=np.int64), part)
            start = stop
