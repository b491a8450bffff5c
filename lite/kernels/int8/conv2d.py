"""int8 Conv2D on NHWC activations with OHWI int8 weights: dense, grouped and depthwise.

acc[c] = sum_k (x_k - zp_x) * (w_k[c] - zp_w[c]) + bias[c] is computed as sum_k x_k * w'_k[c] plus the
compile-time constant bias[c] - zp_x * sum_k w'_k[c] (w' = w - zp_w), with padding filled with zp_x (real 0), so
|x_k| <= 128 bounds the products. The products run in float32 BLAS (im2col GEMM, K split so every partial sum is
exact) or, depthwise, as float32 multiply-adds over the taps; then `Requantizer` maps acc to the output.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadCopy, padded_shape, patches, tap_view
from lite.kernels.conv2d import check_bias, conv_geometry, depthwise_band
from lite.kernels.int8.common import ExactGemm, chunk_depth, fused_bounds, input_quant, output_quant
from lite.kernels.int8.requantize import Requantizer, scales, zero_points
from lite.status import NotSupportedError

F32, I64 = np.dtype(np.float32), np.dtype(np.int64)
MAX_ABS_X = 128


def channel_values(kernel: Kernel, values: np.ndarray, channels: int, what: str) -> np.ndarray:
    """Per-tensor (1) or per-channel (`channels`) parameter values, broadcast to one per channel."""
    if values.size not in (1, channels):
        raise kernel.error(f"{what} has {values.size} quantization parameters for {channels} channels",
                           NotSupportedError)
    return np.broadcast_to(values, (channels,)).copy()


def weight_terms(w: np.ndarray, zp_w: np.ndarray, bias: np.ndarray | None, zp_x: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(w - zp_w as int64 [O, K], the folded bias: bias - zp_x * sum_k (w - zp_w)) for [O, ...] weights."""
    centred = w.reshape(len(w), -1).astype(np.int64) - zp_w[:, None]
    folded = -zp_x * centred.sum(axis=1)
    if bias is not None:
        folded += bias.astype(np.int64)
    return centred, folded


@register("Conv2D", DataType.INT8)
class Conv2DInt8Kernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        g = conv_geometry(self, x, w)
        check_bias(self, bias, g.out_channels)
        if w.value is None or (bias is not None and bias.value is None):
            raise self.error("int8 weight and bias must be constants", NotSupportedError)
        if w.dtype != np.int8 or (bias is not None and bias.dtype != np.int32):
            raise self.error(f"needs an int8 weight and an int32 bias, got {w.dtype} and "
                             f"{bias.dtype if bias is not None else 'none'}", NotSupportedError)
        qx, qy = input_quant(self, x), output_quant(self, x.dtype)
        s_w = channel_values(self, scales(w.quant or []), g.out_channels, "the weight")
        zp_w = channel_values(self, zero_points(w.quant or []), g.out_channels, "the weight")
        centred, folded = weight_terms(w.value, zp_w, bias.value if bias is not None else None, qx.zero_point)
        self.geo, self.qx = g, qx
        self.centred, self.folded = centred, folded
        self.depthwise = g.group > 1 and g.group == g.in_channels == g.out_channels
        bound = MAX_ABS_X * int(np.abs(centred).max(initial=0))
        self.chunk = chunk_depth(g.depth, bound)
        self.depthwise &= self.chunk == g.depth
        lo, hi = fused_bounds(self, self.attrs.activation, qy)
        self.requantize = Requantizer.build(qx.scale * s_w / qy.scale, qy.zero_point, lo, hi)
        return [TensorSpec(g.out_shape, x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        g = self.geo
        source = TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), F32)
        if self.depthwise:
            return [source, TensorSpec(g.out_shape, F32), TensorSpec(g.out_shape, F32),
                    TensorSpec(g.out_shape, I64)]
        padded = [source] if g.padded else []
        cog = g.out_channels // g.group
        return padded + [TensorSpec((g.group, g.rows, g.depth), F32), TensorSpec((g.group, g.rows, cog), F32),
                         TensorSpec((g.rows, g.out_channels), I64)]

    def bind(self, inputs, outputs, scratch) -> None:
        g, x, work = self.geo, inputs[0], list(scratch)
        if self.depthwise:
            buffer, self.product, self.tmp, self.acc = work
            self.pad = PadCopy.build(buffer, x, g.wh, g.ww, float(self.qx.zero_point))
            self.views = [tap_view(buffer[0], g.wh, g.ww, i, j) for i in range(g.wh.kernel)
                          for j in range(g.ww.kernel)]
            self.taps = list(self.centred.astype(np.float32).T)                     # [KH*KW] of [C]
            return
        source = work.pop(0) if g.padded else x[None]
        self.pad = PadCopy.build(source, x, g.wh, g.ww, float(self.qx.zero_point)) if g.padded else None
        columns, product, self.acc = work
        groups, cog = g.group, g.out_channels // g.group
        win = patches(source[0], g.wh, g.ww)                                          # [N, OH, OW, KH, KW, C]
        win = win.reshape(*win.shape[:5], groups, g.in_channels // groups)
        self.columns = (columns.reshape(groups, *win.shape[:5], -1), np.moveaxis(win, 5, 0))
        weight = np.ascontiguousarray(self.centred.reshape(groups, cog, g.depth).transpose(0, 2, 1), F32)
        acc = self.acc.reshape(g.rows, groups, cog).transpose(1, 0, 2)               # [G, M, O/G] view
        bias = self.folded.reshape(groups, 1, cog)
        self.gemm = ExactGemm.build(columns, weight, self.chunk, product, acc, bias)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.pad is not None:
            self.pad()
        if self.depthwise:
            depthwise_band(self.views, self.taps, self.product, self.tmp)
            np.add(self.product, self.folded, out=self.acc, casting="unsafe")
        else:
            np.copyto(*self.columns)
            self.gemm()
        self.requantize(self.acc, outputs[0].reshape(self.acc.shape))
