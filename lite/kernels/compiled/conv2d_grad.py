"""The compiled siblings of Conv2DGradInput and Conv2DGradFilter.

Depthwise dx and dW are single threaded passes that skip the padding (`grad.depthwise_dx`, `grad.depthwise_dw`).
A one-group conv with fewer than `COL2IM_CHANNELS` input channels computes dx in a compiled col2im pass (BLAS
writes [T, M, C] blocks with C under a SIMD vector 2.3x slower): when a window row has KW*C >= 8 floats, per
block of images (as dW) the columns [m, K] = dy @ W and `col2im_pixels`, which adds runs of KW*C floats into the
block's dx (LeNet-5's second conv at batch 128, one thread: 2.1 -> 1.3 ms); shorter rows take
columns^T = W^T @ dy^T [K, M] for the whole batch and `col2im`, which adds runs of OW floats. From 16 channels on
the numpy adds over whole OW*C rows are faster than `col2im`. Every other conv takes the numpy kernels' paths.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled.conv2d import depthwise_taps
from lite.kernels.conv2d import SHORT_RUN, Geometry, block_pixels, image_blocks
from lite.kernels.grad.conv2d_grad import Conv2DGradFilterKernel, Conv2DGradInputKernel

COL2IM_CHANNELS = 8     # compiled dx of one-group convs with fewer input channels (see the module docstring)


def window_args(g: Geometry) -> tuple[int, ...]:
    """Strides, dilations and leading pads, as the compiled depthwise kernels take them."""
    return (g.wh.stride, g.ww.stride, g.wh.dilation, g.ww.dilation, g.wh.pad_begin, g.ww.pad_begin)


@register("Conv2DGradInput", DataType.FLOAT32, backend="compiled")
class Conv2DGradInputCompiled(Conv2DGradInputKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g = self.geo
        columns = g.group == 1 and g.in_channels < COL2IM_CHANNELS and not self.direct
        self.compiled = self.depthwise or columns
        self.pixel_rows = self.compiled and columns and g.ww.kernel * g.in_channels >= SHORT_RUN
        if self.compiled:
            self.gather = False
        else:
            super().select(inputs)

    def scratch(self) -> list[TensorSpec]:
        g, f32 = self.geo, np.dtype(np.float32)
        if not self.compiled:
            return super().scratch()
        if self.depthwise:
            return [TensorSpec((g.wh.kernel, g.ww.kernel, g.in_channels), f32)]
        if self.pixel_rows:
            return [TensorSpec((block_pixels(g, image_blocks(g)[0]) * g.depth,), f32)]
        return [TensorSpec((g.depth, g.rows), f32), TensorSpec((g.batch, g.in_channels, g.wh.size, g.ww.size), f32)]

    def bind(self, inputs, outputs, scratch) -> None:
        if not self.compiled:
            super().bind(inputs, outputs, scratch)
            return
        from lite.kernels.compiled import grad
        dy, w, dx = inputs[0], inputs[1], outputs[0]
        g = self.geo
        self.tap_copy = None
        if self.depthwise:
            self.tap_copy = (scratch[0], depthwise_taps(w))
            self.call = grad.depthwise_dx.bind(dy.size * g.wh.kernel * g.ww.kernel, dy, scratch[0], dx,
                                               *window_args(g))
        elif self.pixel_rows:
            self.bind_pixel_rows(dy, w, dx, scratch[0])
        else:                         # one group: columns^T [K, M], then col2im through [N, C, H, W] planes
            columns = scratch[0]
            self.product = (w.reshape(g.out_channels, -1).T, dy.reshape(g.rows, -1).T, columns)
            blocks = columns.reshape(g.wh.kernel, g.ww.kernel, g.in_channels, *g.out_shape[:3])
            self.call = grad.col2im.bind(columns.size, blocks, scratch[1], dx, *window_args(g))

    def bind_pixel_rows(self, dy: np.ndarray, w: np.ndarray, dx: np.ndarray, flat: np.ndarray) -> None:
        """One group, window rows of KW*C >= SHORT_RUN floats: per block of images, the columns [m, K] = dy @ W
        and `col2im_pixels` into that block of dx, so the columns stay in L2."""
        from lite.kernels.compiled import grad
        g = self.geo
        dy2, weight, area = dy.reshape(g.rows, g.out_channels), w.reshape(g.out_channels, -1), g.wh.out * g.ww.out
        self.blocks = []
        for images in image_blocks(g):
            m = block_pixels(g, images)
            columns = flat[:m * g.depth].reshape(m, g.depth)
            windows = columns.reshape(images.stop - images.start, g.wh.out, g.ww.out, g.wh.kernel, g.ww.kernel,
                                      g.in_channels)
            self.blocks.append(((dy2[images.start * area:images.stop * area], weight, columns),
                                grad.col2im_pixels.bind(columns.size, windows, dx[images], *window_args(g))))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if not self.compiled:
            super().run(inputs, outputs)
        elif self.depthwise:
            np.copyto(*self.tap_copy)
            self.call()
        elif self.pixel_rows:
            for product, col2im in self.blocks:
                np.matmul(*product[:2], out=product[2])
                col2im()
        else:
            np.matmul(*self.product[:2], out=self.product[2])
            self.call()


@register("Conv2DGradFilter", DataType.FLOAT32, backend="compiled")
class Conv2DGradFilterCompiled(Conv2DGradFilterKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        super().select(inputs)
        self.compiled = self.depthwise

    def scratch(self) -> list[TensorSpec]:
        if not self.compiled:
            return super().scratch()
        g = self.geo
        return [TensorSpec((g.wh.kernel, g.ww.kernel, g.out_channels), np.dtype(np.float32))]

    def bind(self, inputs, outputs, scratch) -> None:
        if not self.compiled:
            super().bind(inputs, outputs, scratch)
            return
        from lite.kernels.compiled import grad          # [KH, KW, C] sums (padding skipped), then into OHWI
        dy, x, dw = inputs[0], inputs[1], outputs[0]
        g = self.geo
        self.call = grad.depthwise_dw.bind(dy.size * g.wh.kernel * g.ww.kernel, dy, x, scratch[0], *window_args(g))
        self.unpack = (dw.reshape(g.out_channels, g.wh.kernel, g.ww.kernel), scratch[0].transpose(2, 0, 1))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if not self.compiled:
            super().run(inputs, outputs)
            return
        self.call()
        np.copyto(*self.unpack)
