"""The compiled sibling of int8 FullConnection: where `Requantizer`'s float form is exact (MindSpore Lite's branch
included) and the sums fit int32, the integer GEMM of `int8`, int32 sums requantized as they are written."""
from __future__ import annotations

from typing import Callable, Sequence

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.int8.common import int32_gemm_fits
from lite.kernels.int8.conv2d import MAX_ABS_X
from lite.kernels.int8.full_connection import FullConnectionInt8Kernel


@register("FullConnection", DataType.INT8, quantized=True, backend="compiled")
class FullConnectionInt8Compiled(CompiledCall, FullConnectionInt8Kernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = self.requantize.exact and int32_gemm_fits(self.centred, MAX_ABS_X)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import int8
        k, o = self.weight.shape
        return int8.bind(inputs[0].reshape(self.rows, k), self.centred.T, self.requantize,
                         outputs[0].reshape(self.rows, o))
