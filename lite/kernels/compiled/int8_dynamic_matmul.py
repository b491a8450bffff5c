"""The compiled sibling of dynamic-quantization FullConnection: the rows quantized and multiplied in integers in one
call (`dynamic_gemm`), the bias applied as the sums are written and a fused residual sum and GELU by each task over
its block (a BERT layer's output projections and its feed-forward's first layer: no pass of their own); any other
fused activation follows in numpy."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.int8.dynamic_matmul import DynamicFullConnectionKernel
from schema import fb


@register("FullConnection", DataType.FLOAT32, quantized=True, backend="compiled")
class DynamicFullConnectionCompiled(CompiledCall, DynamicFullConnectionKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        from lite.kernels.compiled import dynamic_gemm
        self.compiled = dynamic_gemm.fits(self.weight.shape[1])
        if self.compiled:
            self.rows_type, self.width = dynamic_gemm.quantized_rows(self.weight.T)

    def call_scratch(self) -> list[TensorSpec]:
        return [TensorSpec((self.rows, self.width), self.rows_type), TensorSpec((self.rows,), np.dtype(np.int32)),
                TensorSpec((self.rows,), np.dtype(np.float32))]

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import dynamic_gemm
        x, out = inputs[0], outputs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        out2d = out.reshape(self.rows, -1)
        self.macs = x.size * out2d.shape[1]
        gelu = self.attrs.activation == fb.ActivationType.GELU
        product = dynamic_gemm.bind(x.reshape(self.rows, -1), self.weight.T, self.weight_scale, bias, out2d,
                                    *scratch, None if residual is None else residual.reshape(out2d.shape), gelu)
        if self.activation is None or gelu:
            return product
        return functools.partial(_then, product, functools.partial(self.activation, out, out))


def _then(first: Callable[[], None], second: Callable[[], None]) -> None:
    first()
    second()
