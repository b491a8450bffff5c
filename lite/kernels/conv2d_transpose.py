"""Conv2DTranspose (ONNX ConvTranspose) on NHWC activations with IHWO weights [in, KH, KW, out/group].

GEMM then col2im: one (batched) matmul gives every input pixel's KH*KW*Cout/G contributions, which are
scatter-added tap by tap into a zeroed full-size buffer; the output is that buffer cropped by the pads. When the
taps tile the buffer (kernel = stride, no dilation: each position gets one contribution, as in MediaPipe's 2x2
stride-2 upsampling) they are copied, with no zeroing and no sum.
Pads follow ONNX: explicit, derived from `output_h/w` (the ONNX output_shape), or SAME_* (output = in * stride).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadMode, Window, finish, tap_view
from lite.kernels.activation import activation_fn
from lite.kernels.conv2d import check_bias
from lite.status import InvalidOpAttrError
from lite.traits import declare


@dataclass(frozen=True)
class TransposedAxis:
    """One spatial axis: input size, kernel taps and the crop [pad_begin, pad_begin + out) of the full result."""
    size: int
    kernel: int
    stride: int
    dilation: int
    pad_begin: int
    out: int

    @property
    def full(self) -> int:
        """Extent of the accumulation buffer: every contribution and every output position."""
        return max((self.size - 1) * self.stride + (self.kernel - 1) * self.dilation + 1, self.pad_begin + self.out)

    @property
    def tiles(self) -> bool:
        """Whether the taps of the input positions cover `full` once each (kernel = stride, no dilation)."""
        return self.kernel == self.stride and self.dilation == 1 and self.full == self.size * self.stride

    @property
    def taps(self) -> Window:
        """Where tap k of input position i lands: i * stride + k * dilation (as a window over `full`)."""
        return Window(self.full, self.kernel, self.stride, self.dilation, 0, 0, self.size)


def transposed_axis(size: int, kernel: int, stride: int, dilation: int, output_pad: int, mode: int,
                    pad_begin: int, pad_end: int, out: int) -> TransposedAxis:
    """Resolve ONNX ConvTranspose padding for one axis; `out` > 0 is a requested output size."""
    if kernel < 1 or stride < 1 or dilation < 1 or output_pad < 0:
        raise ValueError(f"kernel {kernel}, stride {stride}, dilation {dilation} must be positive and "
                         f"output padding {output_pad} non-negative")
    natural = (size - 1) * stride + output_pad + (kernel - 1) * dilation + 1
    if out <= 0 and mode in (PadMode.SAME_UPPER, PadMode.SAME_LOWER):
        out = size * stride
    if out > 0:
        total = max(0, natural - out)
        small = total // 2
        pad_begin = small if mode == PadMode.SAME_UPPER else total - small
    elif mode == PadMode.VALID:
        pad_begin, out = 0, natural
    else:
        if pad_begin < 0 or pad_end < 0:
            raise ValueError(f"negative pads ({pad_begin}, {pad_end}) are not supported")
        out = natural - pad_begin - pad_end
        if out < 1:
            raise ValueError(f"pads ({pad_begin}, {pad_end}) leave no output of size {natural}")
    return TransposedAxis(size, kernel, stride, dilation, pad_begin, out)


declare("Conv2DTranspose", weight_input=1, weight_axis=-1, bias_input=2, fused_activation=True, batchnorm_folds=True)


@register("Conv2DTranspose", DataType.FLOAT32)
class Conv2DTransposeKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w, a = inputs[0], inputs[1], self.attrs
        bias = inputs[2] if len(inputs) > 2 else None
        if x.rank != 4 or w.rank != 4:
            raise self.error(f"needs a 4-D NHWC input and a 4-D IHWO weight, got ranks {x.rank} and {w.rank}")
        n, h, wd, c = x.shape
        cin, kh, kw, cog = w.shape
        group = a.group or 1
        if cin != c or c % group:
            raise self.error(f"input has {c} channels, weight {list(w.shape)} and group {group}: weight dim 0 "
                             f"must equal the channels, which must divide by group")
        try:
            self.ah = transposed_axis(h, kh, a.stride_h, a.dilation_h, a.output_pad_h, a.pad_mode, a.pad_top,
                                      a.pad_bottom, a.output_h)
            self.aw = transposed_axis(wd, kw, a.stride_w, a.dilation_w, a.output_pad_w, a.pad_mode, a.pad_left,
                                      a.pad_right, a.output_w)
        except ValueError as e:
            raise self.error(str(e), InvalidOpAttrError) from None
        check_bias(self, bias, cog * group)
        self.group, self.x, self.w = group, x, w
        self.out_shape = (n, self.ah.out, self.aw.out, cog * group)
        self.crop = (self.ah.pad_begin, self.aw.pad_begin, self.ah.full, self.aw.full) != \
            (0, 0, self.ah.out, self.aw.out)
        self.activation = activation_fn(a.activation)
        return [TensorSpec(self.out_shape, x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        n, h, wd, _ = self.x.shape
        _, kh, kw, cog = self.w.shape
        f32 = np.dtype(np.float32)
        cols = TensorSpec((self.group, n * h * wd, kh * kw * cog), f32)
        return [cols, TensorSpec((n, self.ah.full, self.aw.full, self.out_shape[3]), f32)] if self.crop else [cols]

    def bind(self, inputs, outputs, scratch) -> None:
        x, w, out = inputs[0], inputs[1], outputs[0]
        n, h, wd, c = x.shape
        _, kh, kw, cog = w.shape
        g = self.group
        self.x_groups = x.reshape(n * h * wd, g, c // g).transpose(1, 0, 2)        # [G, M, C/G]
        self.w_groups = w.reshape(g, c // g, kh * kw * cog)                         # [G, C/G, KH*KW*O/G]
        self.cols = scratch[0]
        self.full = scratch[1] if self.crop else out
        per_tap = self.cols.reshape(g, n, h, wd, kh, kw, cog)
        full = self.full.reshape(n, self.ah.full, self.aw.full, g, cog)
        self.scatter = [(tap_view(full, self.ah.taps, self.aw.taps, i, j),
                         np.moveaxis(per_tap[:, :, :, :, i, j], 0, 3)) for i in range(kh) for j in range(kw)]
        self.cropped = self.full[:, self.ah.pad_begin:self.ah.pad_begin + self.ah.out,
                                 self.aw.pad_begin:self.aw.pad_begin + self.aw.out]
        self.bias = inputs[2] if len(inputs) > 2 else None

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out = outputs[0]
        np.matmul(self.x_groups, self.w_groups, out=self.cols)
        if self.ah.tiles and self.aw.tiles:
            for dst, src in self.scatter:
                np.copyto(dst, src)
        else:
            self.full.fill(0)
            for dst, src in self.scatter:
                dst += src
        if self.crop:
            np.copyto(out, self.cropped)
        finish(out, self.bias, self.activation)
