"""The compiled sibling of PoolingGrad: a windowed gradient is one threaded pass over the windows
(`grad.pool_grad`, the numpy kernel's routing), on one thread: a 3x3 stride-2 max pool over 64 channels
20.5 -> 3.0 ms, LeNet-5's 2x2 average at batch 128 1.7 -> 1.3 ms. Global pools take the numpy kernel's path."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels.grad.pooling_grad import PoolingGradKernel


@register("PoolingGrad", DataType.FLOAT32, backend="compiled")
class PoolingGradCompiled(PoolingGradKernel):
    def bind(self, inputs, outputs, scratch) -> None:
        super().bind(inputs, outputs, scratch)
        if self.attrs.global_pool:
            return
        self.compiled = all(a.flags.c_contiguous for a in (*inputs[:3], outputs[0]))     # read flat
        if self.compiled:
            from lite.kernels.compiled import grad
            wh, ww = self.wh, self.ww
            scale = np.ascontiguousarray(self.scale[..., 0] if self.average else np.ones((1, 1), np.float32))
            self.call = grad.pool_grad.bind(inputs[0].size * len(self.taps), *inputs[:3], outputs[0], scale,
                                            wh.kernel, ww.kernel, wh.stride, ww.stride, wh.dilation, ww.dilation,
                                            wh.pad_begin, ww.pad_begin, self.average)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.compiled:
            self.call()
        else:
            super().run(inputs, outputs)
