"""The compiled sibling of float32 Pooling: max and average pooling (windowed or global) as one threaded pass
over the unpadded input with the clamp activation fused. A global pool threads over runs of channels even on a
small input, whose lines sit in the caches of the cores that wrote them (ResNet-50's 7x7x2048 average in a run:
0.147 -> 0.043 ms). Lp pooling, an indices output and other activations take the numpy kernel's path."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.activation import clamp_bounds
from lite.kernels.compiled import CompiledCall
from lite.kernels.pooling import PoolingKernel, reciprocal_counts

REMOTE_READ = 8   # a global pool's work per input element: written by the previous conv's threads, in their caches


@register("Pooling", DataType.FLOAT32, backend="compiled")
class PoolingCompiled(CompiledCall, PoolingKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = (self.x.dtype == np.float32 and not (self.lp or self.indices)
                         and clamp_bounds(self.attrs.activation) is not None)

    def bind(self, inputs, outputs, scratch) -> None:
        if self.attrs.global_pool and not inputs[0].flags.c_contiguous:
            self.compiled = False                   # the compiled pass reads the pixels as one [N, H x W, C] view
        super().bind(inputs, outputs, scratch)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import conv
        x, out = inputs[0], outputs[0]
        lo, hi = (np.float32(b) for b in clamp_bounds(self.attrs.activation))
        if self.attrs.global_pool:     # threaded from few pixels: most of its input is in the other cores' caches
            n, h, w, c = x.shape
            return conv.global_pool_f32.bind(x.size * REMOTE_READ, x.reshape(n, h * w, c), out.reshape(n, c),
                                             self.average, lo, hi)
        wh, ww = self.wh, self.ww
        scale = (reciprocal_counts(wh, ww, self.attrs.count_include_pad)[..., 0] if self.average
                 else np.ones((wh.out, ww.out), np.float32))
        return conv.pool_f32.bind(out.size * wh.kernel * ww.kernel, x, out, scale, wh.kernel, ww.kernel, wh.stride,
                                  ww.stride, wh.dilation, ww.dilation, wh.pad_begin, ww.pad_begin, self.average, lo,
                                  hi)
