"""Pooling (max / average, windowed or global) on NHWC activations, with an optional fused activation.

Windowed pooling is separable: reduce the KW taps along W into a [N, Hp, OW, C] buffer, then the KH taps along
H into the output, which touches KH + KW shifted views instead of KH*KW. Average pooling divides by the
per-position count of taps on data (on data and declared pads with `count_include_pad`); the extra end padding
of ceil mode never counts.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadCopy, Window, axis_taps, finish, make_window, padded_shape
from lite.kernels.activation import activation_fn
from lite.status import InvalidOpAttrError, NotSupportedError
from lite.traits import declare
from schema import fb


def lowest(dtype: np.dtype) -> float:
    """The fill value that never wins a max."""
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def pool_taps(views: Sequence[np.ndarray], out: np.ndarray, combine: Callable[..., np.ndarray]) -> None:
    """out = combine(...combine(views[0], views[1])..., views[-1]), in place."""
    np.copyto(out, views[0])
    for view in views[1:]:
        combine(out, view, out=out)


def reciprocal_counts(wh: Window, ww: Window, include_pad: bool) -> np.ndarray:
    """1 / (taps averaged) for every output position, [OH, OW, 1]."""
    def counts(win: Window) -> np.ndarray:
        return win.taps_in(-win.pad_begin, win.size + win.pad_end) if include_pad else win.taps_in(0, win.size)
    return (1.0 / (counts(wh)[:, None, None] * counts(ww)[None, :, None])).astype(np.float32)


def pooling_windows(kernel: Kernel, h: int, w: int) -> tuple[Window, Window]:
    """The H and W windows of a (non-global) Pooling node over an h x w input."""
    a = kernel.attrs
    try:
        return (make_window(h, a.kernel_h, a.stride_h, a.dilation_h, a.pad_mode, a.pad_top, a.pad_bottom,
                            a.ceil_mode),
                make_window(w, a.kernel_w, a.stride_w, a.dilation_w, a.pad_mode, a.pad_left, a.pad_right,
                            a.ceil_mode))
    except ValueError as e:
        raise kernel.error(str(e), InvalidOpAttrError) from None


declare("Pooling", fused_activation=True, same_quant=True)


@register("Pooling", DataType.FLOAT32, DataType.UINT8)
class PoolingKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        if x.rank != 4:
            raise self.error(f"needs a 4-D NHWC input, got rank {x.rank}")
        self.average = a.mode == fb.PoolMode.AVG
        if self.average and x.dtype.kind != "f":
            raise self.error(f"average pooling of {x.dtype} is not supported", NotSupportedError)
        self.activation = activation_fn(a.activation)
        self.x = x
        n, h, w, c = x.shape
        if a.global_pool:
            return [TensorSpec((n, 1, 1, c), x.dtype)]
        self.wh, self.ww = pooling_windows(self, h, w)
        self.padded = self.wh.has_padding or self.ww.has_padding
        return [TensorSpec((n, self.wh.out, self.ww.out, c), x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        if self.attrs.global_pool:
            return []
        n, c, dtype = self.x.shape[0], self.x.shape[3], self.x.dtype
        padded = [TensorSpec(padded_shape(n, c, self.wh, self.ww), dtype)] if self.padded else []
        return padded + [TensorSpec((n, self.wh.padded, self.ww.out, c), dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        if self.attrs.global_pool:
            return
        work = list(scratch)
        source = work.pop(0) if self.padded else inputs[0][None]      # [1, N, Hp, Wp, C]
        fill = 0 if self.average else lowest(self.x.dtype)
        self.pad = PadCopy.build(source, inputs[0], self.wh, self.ww, fill) if self.padded else None
        source = source[0]
        self.rows = work[0]
        self.row_taps = axis_taps(source, 2, self.ww)          # [N, Hp, OW, C] each
        self.col_taps = axis_taps(self.rows, 1, self.wh)       # [N, OH, OW, C] each
        self.scale = reciprocal_counts(self.wh, self.ww, self.attrs.count_include_pad) if self.average else None

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outputs[0]
        if self.attrs.global_pool:
            (np.mean if self.average else np.max)(x, axis=(1, 2), keepdims=True, out=out)
        else:
            if self.pad is not None:
                self.pad()
            combine = np.add if self.average else np.maximum
            pool_taps(self.row_taps, self.rows, combine)
            pool_taps(self.col_taps, out, combine)
            if self.scale is not None:
                out *= self.scale
        finish(out, None, self.activation)
