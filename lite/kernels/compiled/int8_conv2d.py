"""The compiled sibling of int8 Conv2D, where `Requantizer`'s float form is one exact affine floor or onnxruntime's
float32 rule (which every compiled path also runs):
- direct kernels (`conv`): int32 sums of centred products that skip the padding, requantized as they are
  written; register tiles on the input centred into float32 where those sums are exact in float32 (depthwise
  convs of whole vectors of channels, dense first layers; onnxruntime's rule counts the bias in them), the
  generic depthwise kernel where int32 cannot overflow;
- dense convolutions (group 1): `int8.gemm_requantize`, int16-pair products into int32 accumulators, requantized
  in the GEMM's epilogue (with MindSpore Lite's branch where the model rounds as it does), reading the NHWC rows
  (1x1) or int8 im2col columns;
- otherwise the numpy kernel's float32 GEMM with one threaded requantization pass (`conv.requantize_rows`).
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels._conv_math import PadCopy, grouped_columns, padded_shape
from lite.kernels.compiled.conv2d import dense_taps, depthwise_taps, tiled_dense, tiled_depthwise
from lite.kernels.int8.common import int32_gemm_fits
from lite.kernels.int8.conv2d import F32, MAX_ABS_X, Conv2DInt8Kernel
from lite.kernels.int8.mlas_order import stride_k
from lite.kernels.int8.requantize import ONNXRUNTIME, Requantizer


def exact_in_float32(centred: np.ndarray, init: np.ndarray) -> bool:
    """Whether every partial sum init + sum (x - zp) w' of these centred weights [O, K] from per-channel initial
    values is an integer below 2^24, so float32 holds it exactly (|x - zp| <= 255)."""
    from lite.kernels.compiled.conv import EXACT_SUM
    bound = 255 * np.abs(centred).sum(axis=1) + np.abs(init)
    return float(bound.max()) < EXACT_SUM


def tile_epilogue(rq: Requantizer, zsum: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The register tiles' (init, scale, offset) per channel: zsum, and `float_form`'s scale and offset; for
    onnxruntime's rule the sums start from zsum plus the folded bias (the model's int32 bias), then the float32
    multiplier and the shift zp - lo after the rounding (`conv._tile_code`)."""
    scale, offset, lo, _ = rq.per_channel(len(zsum))
    if rq.rounding != ONNXRUNTIME:
        return zsum.astype(np.float64), scale, offset
    return zsum + offset, scale.astype(F32), np.full(len(zsum), float(rq.zero_point - lo))


@register("Conv2D", DataType.INT8, quantized=True, backend="compiled")
class Conv2DInt8Compiled(Conv2DInt8Kernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g, rq = self.geo, self.requantize
        fused = (rq.affine or rq.rounding == ONNXRUNTIME) and not self.unfused     # the direct kernels' forms
        self.tiled = (fused and (g.group > 1 and g.group == g.in_channels and tiled_depthwise(g) or tiled_dense(g))
                      and exact_in_float32(self.centred, tile_epilogue(rq, self.zsum())[0]))
        self.compiled_direct = self.tiled or (fused and g.group > 1 and g.group == g.in_channels
                                              and int(self.bounds.max()) < 1 << 30)  # int32 sums cannot overflow
        self.compiled_gemm = (self.requantize.exact and not self.tiled and g.group == 1 and not self.unfused
                              and int32_gemm_fits(self.centred, MAX_ABS_X))
        self.pointwise = not g.padded and all(w.kernel == w.stride == 1 for w in (g.wh, g.ww))
        super().select(inputs)
        self.depthwise = self.depthwise and not self.compiled_direct

    def scratch(self) -> list[TensorSpec]:
        g = self.geo
        if self.unfused:          # the base's image, with its columns and output by pixel: [L, K], [L, O]
            image, cols, y = super().scratch()
            return [image, TensorSpec(cols.shape[::-1], cols.dtype), TensorSpec(y.shape[::-1], y.dtype)]
        if self.compiled_direct or (self.compiled_gemm and self.pointwise):
            return []
        if self.compiled_gemm:         # the int8 columns (im2col) and padded input of `bind_gemm`
            padded = [TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), self.x_dtype)] if g.padded else []
            return padded + [TensorSpec((g.rows, g.depth), self.x_dtype)]
        return super().scratch()

    def bind(self, inputs, outputs, scratch) -> None:
        if self.compiled_direct:
            self.bind_direct(inputs[0], outputs[0])
        elif self.compiled_gemm:
            self.bind_gemm(inputs[0], outputs[0], list(scratch))
        else:
            super().bind(inputs, outputs, scratch)
        if self.unfused:
            self.bind_unfused(outputs[0])
        rq = self.requantize
        self.compiled = (self.compiled_direct or self.compiled_gemm or (rq.affine and self.depthwise)
                         or (rq.exact and self.geo.group == 1) or self.unfused)

    def bind_unfused(self, out: np.ndarray) -> None:
        """onnxruntime's unfused float32 conv: its GEMM in MLAS's order with true fused multiply-adds, transposed
        (the image's pixels times the packed weight) so that the output is NHWC, and the bias and QuantizeLinear
        fused after its last block (`mlas_order`)."""
        from lite.kernels.compiled import mlas_order
        g = self.geo
        real, cols, y = self.float_work
        self.pixels = real.reshape(-1, g.in_channels) if self.pointwise else cols
        terms = (self.scale_y, np.float32(self.requantize.zero_point), *(np.float32(b) for b in self.clamp))
        self.convs = [mlas_order.conv.bind(0, self.pixels, mlas_order.pack_panels(self.weight_f),
                                           np.int64(stride_k(cols.shape[0], cols.shape[1])),
                                           mlas_order.pad_bias(self.bias_f, g.out_channels), *terms, y,
                                           image.reshape(y.shape)) for image in out]

    def run_unfused(self, x: np.ndarray, out: np.ndarray) -> None:
        """DequantizeLinear, then (but for a 1x1 conv) the columns by pixel, then the fused conv, an image at a
        time."""
        from lite.kernels.int8 import mlas_order
        real, cols, _ = self.float_work
        for image, conv in zip(x, self.convs):
            np.subtract(image, self.qx.zero_point, out=real, dtype=np.float32)
            real *= np.float32(self.qx.scale)
            if self.pixels is cols:
                mlas_order.columns(real, self.geo, cols, by_pixel=True)
            conv()

    def requantize_rows(self, acc: np.ndarray, out: np.ndarray, bound: Callable[[], None]) -> Callable[[], None]:
        """One threaded pass of `Requantizer`'s float form over [M, O] accumulators (any layout), where exact
        (with MindSpore Lite's branch where it has one, or onnxruntime's float32 rule)."""
        rq = self.requantize
        if not rq.exact:
            return bound
        scale, offset, lo, top = rq.per_channel(self.geo.out_channels)
        if rq.rounding == ONNXRUNTIME:
            from lite.kernels.compiled import int8_requantize
            return int8_requantize.requantize_rows_float32.bind(acc.size, acc, scale, offset, np.int32(rq.zero_point),
                                                                np.int32(lo), np.int32(rq.hi), out)
        if rq.below is not None:
            from lite.kernels.compiled import int8_requantize
            step = np.ascontiguousarray(np.broadcast_to(rq.below.step, scale.shape), np.float64)
            return int8_requantize.requantize_rows_below.bind(acc.size, acc, scale, offset, step,
                                                              np.float64(rq.below.threshold), np.int32(lo), top, out)
        from lite.kernels.compiled import conv
        return conv.requantize_rows.bind(acc.size, acc, scale, offset, np.int32(lo), top, out)

    def bind_gemm(self, x: np.ndarray, out: np.ndarray, work: list[np.ndarray]) -> None:
        """The int8 GEMM (`int8`) on the NHWC rows (1x1, stride 1) or on int8 im2col columns of the input padded
        with its zero point, requantized as it is written."""
        from lite.kernels.compiled import int8
        g = self.geo
        self.pad, self.columns = None, None
        if self.pointwise:
            lhs = x.reshape(g.rows, g.depth)
        else:
            source = work.pop(0) if g.padded else x[None]
            self.pad = PadCopy.build(source, x, g.wh, g.ww, self.qx.zero_point) if g.padded else None
            self.columns = grouped_columns(source[0], g.wh, g.ww, 1, work[0])
            lhs = work[0]
        self.call = int8.bind(lhs, self.centred.T, self.requantize, out.reshape(g.rows, g.out_channels))

    def zsum(self) -> np.ndarray:
        """The padding's share of each channel's centred sum, zp_x sum w' (`bind_direct`)."""
        return self.qx.zero_point * self.centred.sum(axis=1)

    def bind_direct(self, x: np.ndarray, out: np.ndarray) -> None:
        """The direct kernels: int32 sums of centred products, skipping the padding (its share, the zero point
        times the taps, is the constant `zsum`), requantized as they are written; as register tiles (on the
        input centred into float32) where those sums are exact in float32, which a dense first layer needs."""
        from lite.kernels.compiled import conv
        g, zp = self.geo, self.qx.zero_point
        weight = self.centred.reshape(g.out_channels, g.wh.kernel, g.ww.kernel, g.in_channels // g.group)
        taps = np.ascontiguousarray((dense_taps if g.group == 1 else depthwise_taps)(weight), np.int32)
        rq = self.requantize
        scale, offset, lo, top = rq.per_channel(self.geo.out_channels)
        window = (g.wh.stride, g.ww.stride, g.wh.dilation, g.ww.dilation, g.wh.pad_begin, g.ww.pad_begin)
        work = out.size * g.depth
        if self.tiled:
            init, scale, offset = tile_epilogue(rq, self.zsum())
            self.call = conv.conv_tiled.bind(work, x, True, np.zeros(1, F32), np.int32(zp), taps.astype(F32),
                                             init.astype(F32), scale, offset, np.int32(lo), np.float64(top), out,
                                             *window)
        else:
            zsum = self.zsum().astype(np.int32)
            self.call = conv.depthwise_i8.bind(work, x, taps, zsum, np.int32(zp), scale, offset,
                                               np.int32(rq.rounding == ONNXRUNTIME), np.float64(rq.zero_point - lo),
                                               np.int32(lo), top, out, *window)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.compiled_gemm:
            if self.pad is not None:
                self.pad()
            if self.columns is not None:
                np.copyto(*self.columns)
        if self.compiled_direct or self.compiled_gemm:
            self.call()
        else:
            super().run(inputs, outputs)
