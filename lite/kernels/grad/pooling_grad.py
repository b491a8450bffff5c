"""PoolingGrad (inputs dy, x, y -> dx, NHWC): the gradient of max and average pooling, windowed or global.

Both walk the kernel taps clipped to the data region (`data_taps`), so padding and ceil mode need no buffer:
- max: dy goes to the first maximum of each window in scan order (PyTorch's choice on ties, which ReLU zeros make
  common): per tap, the positions where x equals y and no earlier tap matched take dy.
- average: dy times the forward's reciprocal tap counts (so `count_include_pad` is honoured) is added to every
  input the window read.
When windows do not overlap (stride >= dilated extent) each input has one window, so taps write dx directly.
The compiled sibling (`compiled/pooling_grad.py`) runs a windowed gradient as one threaded pass.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import make_window
from lite.kernels.grad.conv2d_grad import data_taps
from lite.kernels.pooling import reciprocal_counts
from lite.status import InvalidOpAttrError, NotSupportedError
from schema import fb


def global_max_grad(dy: np.ndarray, x: np.ndarray, dx: np.ndarray) -> None:
    """dx = dy at the first maximum of each (image, channel) over H*W, zero elsewhere."""
    n, h, w, c = x.shape
    first = x.reshape(n, h * w, c).argmax(axis=1)
    dx.fill(0.0)
    np.put_along_axis(dx.reshape(n, h * w, c), first[:, None, :], dy.reshape(n, 1, c), axis=1)


@register("PoolingGrad", DataType.FLOAT32)
class PoolingGradKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, y = inputs[:3]
        a = self.attrs
        if x.rank != 4:
            raise self.error(f"needs a 4-D NHWC input, got rank {x.rank}")
        if a.activation != fb.ActivationType.NO_ACTIVATION:
            raise self.error("pooling with a fused activation has no gradient kernel", NotSupportedError)
        if a.mode not in (fb.PoolMode.MAX, fb.PoolMode.AVG):
            raise self.error("only max and average pooling have a gradient kernel", NotSupportedError)
        self.average = a.mode == fb.PoolMode.AVG
        n, h, w, c = x.shape
        self.out_shape = (n, 1, 1, c)
        if not a.global_pool:
            try:
                self.wh = make_window(h, a.kernel_h, a.stride_h, a.dilation_h, a.pad_mode, a.pad_top,
                                      a.pad_bottom, a.ceil_mode)
                self.ww = make_window(w, a.kernel_w, a.stride_w, a.dilation_w, a.pad_mode, a.pad_left,
                                      a.pad_right, a.ceil_mode)
            except ValueError as e:
                raise self.error(str(e), InvalidOpAttrError) from None
            self.out_shape = (n, self.wh.out, self.ww.out, c)
            self.taps = data_taps(self.wh, self.ww)
            self.overlap = self.wh.span > self.wh.stride or self.ww.span > self.ww.stride
        if dy.shape != self.out_shape or y.shape != self.out_shape:
            raise self.error(f"dy {list(dy.shape)} and y {list(y.shape)} must have the pooled shape "
                             f"{list(self.out_shape)}")
        return [TensorSpec(x.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        if self.attrs.global_pool:
            return []
        f32 = TensorSpec(self.out_shape, np.dtype(np.float32))
        flags = TensorSpec(self.out_shape, np.dtype(np.bool_))
        if self.average:
            return [f32]
        return [flags, flags] + [f32] * self.overlap

    def bind(self, inputs, outputs, scratch) -> None:
        if self.attrs.global_pool:
            return
        self.work = list(scratch)
        self.scale = reciprocal_counts(self.wh, self.ww, self.attrs.count_include_pad) if self.average else None

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x, y = inputs[:3]
        dx = outputs[0]
        if self.attrs.global_pool:
            if self.average:
                np.multiply(dy, 1.0 / (x.shape[1] * x.shape[2]), out=dx)
            else:
                global_max_grad(dy, x, dx)
            return
        dx.fill(0.0)
        if self.average:
            self._average(dy, dx)
        else:
            self._max(dy, x, y, dx)

    def _average(self, dy: np.ndarray, dx: np.ndarray) -> None:
        share = self.work[0]
        np.multiply(dy, self.scale, out=share)
        for t in self.taps:
            if self.overlap:
                dx[t.src] += share[t.out]
            else:
                np.copyto(dx[t.src], share[t.out])

    def _max(self, dy: np.ndarray, x: np.ndarray, y: np.ndarray, dx: np.ndarray) -> None:
        pending, hit = self.work[:2]                  # pending: windows whose maximum is not yet routed
        pending.fill(True)
        for k, t in enumerate(self.taps):
            h, o = hit[t.out], pending[t.out]
            np.equal(x[t.src], y[t.out], out=h)
            h &= o
            if k + 1 < len(self.taps):
                o ^= h
            if self.overlap:
                share = self.work[2][t.out]
                np.multiply(dy[t.out], h, out=share)
                dx[t.src] += share
            else:
                np.multiply(dy[t.out], h, out=dx[t.src])
