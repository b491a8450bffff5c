"""The compiled sibling of float32 FullConnection: a constant weight with a clamp activation runs the compiled
GEMM (`gemm`) with bias, residual and clamp in its epilogue; otherwise numpy's product, with bias and clamp in
one compiled pass (`epilogue`)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.activation import clamp_bounds
from lite.kernels.compiled import Bound
from lite.kernels.compiled.epilogue import epilogue
from lite.kernels.full_connection import FullConnectionKernel


@register("FullConnection", DataType.FLOAT32, backend="compiled")
class FullConnectionCompiled(FullConnectionKernel):
    epilogue = staticmethod(epilogue)

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        self.fused = (w.value is not None and (bias is None or bias.value is not None)
                      and x.dtype == np.float32 and clamp_bounds(self.attrs.activation) is not None)

    def bind(self, inputs, outputs, scratch) -> None:
        if not self.fused:
            super().bind(inputs, outputs, scratch)
            self.compiled = isinstance(self.finish, Bound)
            return
        from lite.kernels.compiled import gemm       # a constant weight: bias, residual and clamp in the GEMM
        x, w, out = inputs[0], inputs[1], outputs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        self.x2d, self.w_t, self.out2d = x.reshape(-1, x.shape[-1]), w.T, out.reshape(-1, w.shape[0])
        self.macs = self.x2d.size * w.shape[0]
        self.multiply = gemm.bind(self.x2d, self.w_t, bias, *clamp_bounds(self.attrs.activation), self.out2d,
                                  None if residual is None else residual.reshape(self.out2d.shape))
        self.finish = None
        self.compiled = True
