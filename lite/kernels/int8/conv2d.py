"""int8 Conv2D on NHWC activations with OHWI int8 weights: dense, grouped and depthwise.

acc[c] = sum_k (x_k - zp_x) * (w_k[c] - zp_w[c]) + bias[c] is computed as sum_k x_k * w'_k[c] plus the
compile-time constant bias[c] - zp_x * sum_k w'_k[c] (w' = w - zp_w), with padding filled with zp_x (real 0), so
|x_k| <= 128 bounds the products. The products run in float32 like the float kernel's (im2col GEMM, transposed
for small M; depthwise as banded multiply-adds, `DepthwiseBands`), exact because K is split wherever a per-channel
L1 bound could pass 2^24 (`exact_ranges`); `Requantizer` then folds the constant bias into its float64 passes and
writes int8 straight from the float32 products, a cache-sized chunk at a time. The compiled sibling
(`compiled/int8_conv2d.py`) runs integer GEMMs and direct kernels of its own where they are exact.

A node rounding as `ONNXRUNTIME_FLOAT32` (a QDQ Conv that onnxruntime leaves unfused) instead dequantizes its
input, sums in float32 in onnxruntime's order (`mlas_order`) and quantizes as QuantizeLinear does: x / s_y,
half to even.
"""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadCopy, grouped_columns, padded_shape
from lite.kernels.conv2d import SMALL_M, DepthwiseBands, check_bias, conv_geometry, depthwise_band
from lite.kernels.int8.common import ExactGemm, exact_ranges, fused_bounds, input_quant, output_quant
from lite.kernels.int8 import mlas_order
from lite.kernels.int8.requantize import ONNXRUNTIME, ONNXRUNTIME_FLOAT32, Requantizer, real_multiplier, scales, \
    zero_points
from lite.status import NotSupportedError

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
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


def acc_bounds(centred: np.ndarray, max_x: int) -> np.ndarray:
    """Per-channel bound of |sum_k x_k w_k| for [O, K] weights and inputs |x| <= max_x."""
    return max_x * np.abs(centred).sum(axis=1)


@register("Conv2D", DataType.INT8, quantized=True)
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
        self.geo, self.qx, self.centred, self.x_dtype = g, qx, centred, x.dtype
        self.ranges = exact_ranges(centred.T, MAX_ABS_X)
        lo, hi = fused_bounds(self, self.attrs.activation, qy)
        self.bounds = acc_bounds(centred, MAX_ABS_X)
        rounding = self.node.rounding
        # onnxruntime's float32 order is reproduced for dense convs (GEMMs); a grouped one keeps its integer rule
        self.unfused = rounding == ONNXRUNTIME_FLOAT32 and g.group == 1
        rounding = ONNXRUNTIME if rounding == ONNXRUNTIME_FLOAT32 else rounding
        self.requantize = Requantizer.build(real_multiplier(qx.scale, s_w, qy.scale, rounding), qy.zero_point, lo,
                                            hi, folded, self.bounds, rounding)
        if self.unfused:
            self.float_terms(bias, s_w, qy.scale, lo, hi)
        return [TensorSpec(g.out_shape, x.dtype)]

    def float_terms(self, bias: TensorSpec | None, s_w: np.ndarray, s_y: float, lo: int, hi: int) -> None:
        """onnxruntime's unfused form: the dequantized weight as MLAS's A [O, K], the dequantized bias, and the
        output's float32 scale and clamp."""
        real = self.centred.astype(F32) * s_w.astype(F32)[:, None]
        self.weight_f = mlas_order.weight_rows(real, self.geo)
        self.bias_f = None if bias is None else (bias.value.astype(F32) * scales(bias.quant or []).astype(F32))
        self.scale_y, self.clamp = np.float32(s_y), (lo, hi)

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        g = self.geo
        if self.unfused:
            self.depthwise = self.transposed = False
            return
        self.depthwise = g.group > 1 and g.group == g.in_channels == g.out_channels and len(self.ranges) == 1
        self.transposed = not self.depthwise and g.group == 1 and g.rows < SMALL_M

    def product_shape(self) -> tuple[int, ...]:
        g = self.geo
        return (g.out_channels, g.rows) if self.transposed else (g.group, g.rows, g.out_channels // g.group)

    def acc_shape(self) -> tuple[int, ...]:
        """The accumulator as requantized: [O, M] transposed, [M, O] dense, [G, M, O/G] grouped."""
        g = self.geo
        return self.product_shape() if self.transposed or g.group > 1 else (g.rows, g.out_channels)

    def scratch(self) -> list[TensorSpec]:
        g = self.geo
        if self.unfused:          # an image dequantized, its columns, the GEMM's output
            pixels = g.wh.out * g.ww.out
            return [TensorSpec((g.wh.size, g.ww.size, g.in_channels), F32), TensorSpec((g.depth, pixels), F32),
                    TensorSpec((g.out_channels, pixels), F32)]
        if self.depthwise:
            band = DepthwiseBands.scratch(g)
            rows, width = band[1].shape[1:3]
            return band + [TensorSpec(g.out_shape, F32), Requantizer.work((rows * width, g.out_channels))]
        padded = [TensorSpec(padded_shape(g.batch, g.in_channels, g.wh, g.ww), F32)] if g.padded else []
        product = self.product_shape()
        total = [TensorSpec(product, F64)] if len(self.ranges) > 1 else []
        return padded + [TensorSpec((g.group, g.rows, g.depth), F32), TensorSpec(product, F32), *total,
                         Requantizer.work(self.acc_shape())]

    def bind(self, inputs, outputs, scratch) -> None:
        g, x, out, work = self.geo, inputs[0], outputs[0], list(scratch)
        zp = float(self.qx.zero_point)
        if self.unfused:
            self.float_work = work
            pointwise = g.depth == g.in_channels and (g.wh.out, g.ww.out) == (g.wh.size, g.ww.size) and all(
                w.pad_begin == 0 for w in (g.wh, g.ww))                                    # 1x1, stride 1
            image = work[1].T.reshape(work[0].shape) if pointwise else None
            self.image = image if image is not None and np.shares_memory(image, work[1]) else None
            self.gemm = functools.partial(mlas_order.sgemm, self.weight_f, *work[1:])
            self.quantizers = [functools.partial(self.quantize, image.reshape(-1, g.out_channels)) for image in out]
            return
        if self.depthwise:
            self.bind_depthwise(x, out, work, zp)
            return
        source = work.pop(0) if g.padded else x[None]
        self.pad = PadCopy.build(source, x, g.wh, g.ww, zp) if g.padded else None
        columns, product = work[:2]
        total = work[2] if len(self.ranges) > 1 else None
        groups, cog = g.group, g.out_channels // g.group
        self.columns = grouped_columns(source[0], g.wh, g.ww, groups, columns)
        weight = self.centred.reshape(groups, cog, g.depth).astype(F32)              # [G, O/G, K]
        out2d = out.reshape(g.rows, g.out_channels)
        rq_work = work[-1]
        if self.transposed:                  # product^T [O, M] = W @ cols^T, as the float kernel does
            self.gemm = ExactGemm.build(weight[0], columns[0].T, self.ranges, product, total)
            self.finish = self.requantize_rows(self.gemm.result.T, out2d, self.requantize.along(
                (g.out_channels, 1)).bind(self.gemm.result, out2d.T, rq_work))
        elif groups == 1:
            self.gemm = ExactGemm.build(columns[0], np.ascontiguousarray(weight[0].T), self.ranges, product[0],
                                        None if total is None else total[0])
            self.finish = self.requantize_rows(self.gemm.result, out2d,
                                               self.requantize.bind(self.gemm.result, out2d, rq_work))
        else:
            self.gemm = ExactGemm.build(columns, np.ascontiguousarray(weight.transpose(0, 2, 1)), self.ranges,
                                        product, total)
            self.finish = self.requantize.along((groups, 1, cog)).bind(
                self.gemm.result, out2d.reshape(g.rows, groups, cog).transpose(1, 0, 2), rq_work)

    def bind_depthwise(self, x: np.ndarray, out: np.ndarray, work: list[np.ndarray], zp: float) -> None:
        """`DepthwiseBands` over a float32 output, each band requantized into `out` while it is in cache."""
        g = self.geo
        band_work, products, rq_work = work[:2], work[2], work[3]
        weight = self.centred.astype(F32).reshape(g.out_channels, g.wh.kernel, g.ww.kernel, 1)
        bands = DepthwiseBands.build(g, True, x, weight, products, band_work, lambda band: None)
        self.taps, self.bands = bands.taps, []
        rows = band_work[1].shape[1]
        starts = [(n, top) for n in range(g.batch) for top in range(0, g.wh.out, rows)]
        for (fill, views, band, tmp), (n, top) in zip(bands.bands, starts):
            dst = out[n:n + 1, top:top + band.shape[1]]
            finish = self.requantize.bind(band.reshape(-1, g.out_channels), dst.reshape(-1, g.out_channels),
                                          rq_work)
            self.bands.append((replace(fill, fill=zp), views, band, tmp, finish))

    def requantize_rows(self, acc: np.ndarray, out: np.ndarray, bound: Callable[[], None]) -> Callable[[], None]:
        """The requantization of the dense GEMM's [M, O] accumulators `acc` (any layout) into `out`: `bound`,
        `Requantizer`'s passes prebound by the caller (a sibling may run one pass of its own instead)."""
        return bound

    def run_unfused(self, x: np.ndarray, out: np.ndarray) -> None:
        """DequantizeLinear, onnxruntime's float32 Conv (`mlas_order`) and QuantizeLinear, an image at a time."""
        real, cols, y = self.float_work
        target = real if self.image is None else self.image     # a 1x1 conv's columns are the image itself
        for image, quantize in zip(x, self.quantizers):
            np.subtract(image, self.qx.zero_point, out=target, dtype=F32)
            target *= np.float32(self.qx.scale)
            if self.image is None:
                mlas_order.columns(real, self.geo, cols)
            self.gemm()
            if self.bias_f is not None:
                y += self.bias_f[:, None]
            quantize()

    def quantize(self, out: np.ndarray) -> None:
        """QuantizeLinear of the GEMM's output y [O, L] into out [L, O]: rint(y / s_y) + zp, clamped (float32;
        the compiled sibling binds its own)."""
        y = self.float_work[2]
        q = np.rint(y / self.scale_y) + np.float32(self.requantize.zero_point)
        np.clip(q, *self.clamp, out=q)
        out[...] = q.T

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.unfused:
            self.run_unfused(inputs[0], outputs[0])
            return
        if self.depthwise:
            for fill, views, band, tmp, finish in self.bands:
                fill()
                depthwise_band(views, self.taps, band, tmp)
                finish()
            return
        if self.pad is not None:
            self.pad()
        np.copyto(*self.columns)
        self.gemm()
        self.finish()
