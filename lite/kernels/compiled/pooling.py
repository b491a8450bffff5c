"""The compiled sibling of float32 Pooling: max and average pooling (windowed or global) as one threaded pass
over the unpadded input with the clamp activation fused (2x2 max windows inside the input: `max_pool_2x2`). A
global pool threads over runs of channels even on a small input, whose lines sit in the caches of the cores that
wrote them (ResNet-50's 7x7x2048 average in a run: 0.147 -> 0.043 ms). Lp pooling, an indices output and other activations take the numpy kernel's path."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels._conv_math import Window
from lite.kernels.activation import clamp_bounds
from lite.kernels.compiled import CompiledCall
from lite.kernels.pooling import PoolingKernel, reciprocal_counts

REMOTE_READ = 8   # a global pool's work per input element: written by the previous conv's threads, in their caches
WINDOW_TAP = 6    # a window tap's time in GEMM multiply-adds, the unit of the threading threshold (BlazeFace's 2x2
#                   max pool of 64x64x28: 15.7 us for 115k taps on one core; the GEMM ~12 us for 524k)


def inside_2x2(window: Window) -> bool:
    """Whether every window of this axis is 2 taps wide (dilation 1) and inside the input (`max_pool_2x2`)."""
    return (window.kernel == 2 and window.dilation == 1 and window.pad_begin == 0
            and (window.out - 1) * window.stride + 2 <= window.size)


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
        if not self.average and inside_2x2(wh) and inside_2x2(ww):
            return conv.max_pool_2x2.bind(out.size * 4 * WINDOW_TAP, x, out, wh.stride, ww.stride, lo, hi)
        scale = (reciprocal_counts(wh, ww, self.attrs.count_include_pad)[..., 0] if self.average
                 else np.ones((wh.out, ww.out), np.float32))
        return conv.pool_f32.bind(out.size * wh.kernel * ww.kernel * WINDOW_TAP, x, out, scale, wh.kernel, ww.kernel,
                                  wh.stride, ww.stride, wh.dilation, ww.dilation, wh.pad_begin, ww.pad_begin,
                                  self.average, lo, hi)
