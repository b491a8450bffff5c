"""int8 Pooling (max / average, windowed or global) on NHWC, with fused RELU / RELU6 as clamps.

Max pools the int8 values (padding never wins); average sums them in int32 (padding counts as real 0 only with
`count_include_pad`) and divides by the tap count rounding half away from zero, as TFLite does. When the output's
params differ from the input's, the pooled value is then requantized: y = MBQM(v - zp_x, s_x / s_y) + zp_y.

MindSpore Lite's kernels (the node's `rounding` is NNACL) round the average half up, and requantize in float64:
y = round((v - zp_x) * (s_x / s_y in float32)) + zp_y, half away from zero.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadCopy, Window, axis_taps, padded_shape
from lite.kernels.int8.common import fused_bounds, input_quant, output_quant
from lite.kernels.int8.requantize import NNACL, Requantizer, same_params
from lite.kernels.pooling import lowest, pool_taps, pooling_windows
from lite.status import NotSupportedError
from schema import fb

I32 = np.dtype(np.int32)


def rounded_mean(total: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """total / count rounded half away from zero (TFLite's (sum +- count/2) / count with C division)."""
    half = np.asarray(count) // 2
    return np.sign(total) * ((np.abs(total) + half) // count)


def rounded_mean_up(total: np.ndarray, count: np.ndarray | int) -> np.ndarray:
    """total / count rounded half up (MindSpore Lite's (sum + 128 count + count / 2) / count - 128)."""
    return (2 * total + count) // (2 * np.asarray(count))


def tap_counts(wh: Window, ww: Window, include_pad: bool) -> np.ndarray:
    """Taps averaged at every output position, [OH, OW, 1]."""
    def counts(win: Window) -> np.ndarray:
        return win.taps_in(-win.pad_begin, win.size + win.pad_end) if include_pad else win.taps_in(0, win.size)
    return (counts(wh)[:, None, None] * counts(ww)[None, :, None]).astype(np.int64)


@register("Pooling", DataType.INT8, quantized=True)
class PoolingInt8Kernel(Kernel):
    @classmethod
    def accepts(cls, attrs: Mapping[str, Any], n_outputs: int) -> bool:
        """Max or average with one output; LP pooling and max pooling's indices stay float."""
        return attrs.get("mode", fb.PoolMode.MAX) in (fb.PoolMode.MAX, fb.PoolMode.AVG) and n_outputs == 1

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        if x.rank != 4:
            raise self.error(f"needs a 4-D NHWC input, got rank {x.rank}")
        if not self.accepts(vars(a), len(self.node.outputs)):
            raise self.error("int8 pooling is max or average with one output", NotSupportedError)
        qx, qy = input_quant(self, x), output_quant(self, x.dtype)
        self.x, self.zp_x = x, qx.zero_point
        self.average = a.mode == fb.PoolMode.AVG
        lo, hi = fused_bounds(self, a.activation, qy)
        real = 1.0 if same_params(x.quant, self.out_quant[0]) else qx.scale / qy.scale
        self.nnacl = self.node.rounding == NNACL
        if self.nnacl:
            self.nnacl_real = None if real == 1.0 else float(np.float32(qx.scale) / np.float32(qy.scale))
            self.zp_y, self.lo, self.hi = qy.zero_point, lo, hi
        else:
            self.requantize = Requantizer.build(real, qy.zero_point, lo, hi, acc_bound=qx.hi - qx.lo)
        n, h, w, c = x.shape
        if a.global_pool:
            self.count = h * w
            return [TensorSpec((n, 1, 1, c), x.dtype)]
        self.wh, self.ww = pooling_windows(self, h, w)
        self.padded = self.wh.has_padding or self.ww.has_padding
        self.count = tap_counts(self.wh, self.ww, a.count_include_pad) if self.average else None
        return [TensorSpec((n, self.wh.out, self.ww.out, c), x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        n, _, _, c = self.x.shape
        acc = I32 if self.average else self.x.dtype
        if self.attrs.global_pool:
            return []
        padded = [TensorSpec(padded_shape(n, c, self.wh, self.ww), self.x.dtype)] if self.padded else []
        return padded + [TensorSpec((n, self.wh.padded, self.ww.out, c), acc),
                         TensorSpec((n, self.wh.out, self.ww.out, c), acc)]

    def bind(self, inputs, outputs, scratch) -> None:
        if self.attrs.global_pool:
            return
        work = list(scratch)
        source = work.pop(0) if self.padded else inputs[0][None]
        fill = (self.zp_x if self.attrs.count_include_pad else 0) if self.average else lowest(self.x.dtype)
        self.pad = PadCopy.build(source, inputs[0], self.wh, self.ww, fill) if self.padded else None
        self.rows, self.pooled = work
        self.row_taps = axis_taps(source[0], 2, self.ww)
        self.col_taps = axis_taps(self.rows, 1, self.wh)

    def pool(self, x: np.ndarray) -> np.ndarray:
        """The pooled int8 values in the input's quantization."""
        if self.attrs.global_pool:
            if not self.average:
                return x.max(axis=(1, 2), keepdims=True)
            return self.mean(x.sum(axis=(1, 2), keepdims=True, dtype=np.int64), self.count)
        if self.pad is not None:
            self.pad()
        combine = np.add if self.average else np.maximum
        pool_taps(self.row_taps, self.rows, combine)
        pool_taps(self.col_taps, self.pooled, combine)
        return self.mean(self.pooled, self.count) if self.average else self.pooled

    def mean(self, total: np.ndarray, count: np.ndarray | int) -> np.ndarray:
        return rounded_mean_up(total, count) if self.nnacl else rounded_mean(total, count)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        pooled = self.pool(inputs[0])
        if not self.nnacl:
            self.requantize(np.subtract(pooled, self.zp_x, dtype=np.int64), outputs[0])
            return
        v = np.subtract(pooled, self.zp_x, dtype=np.int64)
        if self.nnacl_real is not None:
            v = v * self.nnacl_real
            v = np.sign(v) * np.floor(np.abs(v) + 0.5)
        np.clip(v + self.zp_y, self.lo, self.hi, out=outputs[0], casting="unsafe")
