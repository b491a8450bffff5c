"""Pooling (max / average / Lp, windowed or global) on NHWC activations, with an optional fused activation.

Windowed pooling is separable: reduce the KW taps along W into a [N, Hp, OW, C] buffer, then the KH taps along
H into the output, which touches KH + KW shifted views instead of KH*KW. Average pooling divides by the
per-position count of taps on data (on data and declared pads with `count_include_pad`); the extra end padding
of ceil mode never counts. Lp pooling sums |x|^p (padding is zero) and takes the p-th root.

The compiled sibling (`compiled/pooling.py`) runs float32 max and average pooling as one threaded pass.

Max pooling with a second output also gives, for each maximum, its index in the flattened NCHW input (ONNX
MaxPool's `Indices`; column-major H, W with `storage_order`), found by one compare per kernel tap.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import PadCopy, Window, axis_taps, finish, make_window, padded_shape, tap_view
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


def tap_indices(wh: Window, ww: Window, column_major: bool) -> np.ndarray:
    """[KH*KW, OH, OW]: the flat H*W index (row- or column-major) of each tap's input position."""
    rows = (np.arange(wh.out) * wh.stride - wh.pad_begin)[None, :] + np.arange(wh.kernel)[:, None] * wh.dilation
    cols = (np.arange(ww.out) * ww.stride - ww.pad_begin)[None, :] + np.arange(ww.kernel)[:, None] * ww.dilation
    r, c = rows[:, None, :, None], cols[None, :, None, :]                        # [KH, 1, OH, 1], [1, KW, 1, OW]
    flat = r + c * wh.size if column_major else r * ww.size + c
    return flat.reshape(wh.kernel * ww.kernel, wh.out, ww.out)


def lp_power(p: float) -> Callable[[np.ndarray], None]:
    """In-place x -> |x|^p."""
    def power(x: np.ndarray) -> None:
        np.abs(x, out=x)
        if p != 1:
            np.power(x, p, out=x)
    return power


def lp_root(out: np.ndarray, p: float) -> None:
    if p != 1:
        np.power(out, 1.0 / p, out=out)


@register("Pooling", DataType.FLOAT32, DataType.UINT8)
class PoolingKernel(Kernel):
    float16_compute = True
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        if x.rank != 4:
            raise self.error(f"needs a 4-D NHWC input, got rank {x.rank}")
        if a.mode not in (fb.PoolMode.MAX, fb.PoolMode.AVG, fb.PoolMode.LP):
            raise self.error(f"pooling mode {a.mode} is unknown", InvalidOpAttrError)
        self.average, self.lp = a.mode == fb.PoolMode.AVG, a.mode == fb.PoolMode.LP
        if (self.average or self.lp) and x.dtype.kind != "f":
            raise self.error(f"average and Lp pooling of {x.dtype} are not supported", NotSupportedError)
        if self.lp and not a.p > 0:
            raise self.error(f"Lp pooling needs p > 0, got {a.p}", InvalidOpAttrError)
        self.indices = len(self.node.outputs) == 2
        if self.indices and (a.mode != fb.PoolMode.MAX or a.global_pool):
            raise self.error("only windowed max pooling has an indices output", NotSupportedError)
        self.activation = activation_fn(a.activation)
        self.x = x
        n, h, w, c = x.shape
        if a.global_pool:
            return [TensorSpec((n, 1, 1, c), x.dtype)]
        self.wh, self.ww = pooling_windows(self, h, w)
        self.padded = self.wh.has_padding or self.ww.has_padding or self.lp     # Lp: |x|^p needs a buffer
        out = TensorSpec((n, self.wh.out, self.ww.out, c), x.dtype)
        return [out, TensorSpec(out.shape, np.dtype(np.int64))] if self.indices else [out]

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
        fill = 0 if self.average or self.lp else lowest(self.x.dtype)
        self.pad = PadCopy.build(source, inputs[0], self.wh, self.ww, fill) if self.padded else None
        self.source = source = source[0]
        self.rows = work[0]
        self.row_taps = axis_taps(source, 2, self.ww)          # [N, Hp, OW, C] each
        self.col_taps = axis_taps(self.rows, 1, self.wh)       # [N, OH, OW, C] each
        self.scale = reciprocal_counts(self.wh, self.ww, self.attrs.count_include_pad) if self.average else None
        if self.indices:
            n, h, w, c = self.x.shape
            self.taps = [tap_view(source, self.wh, self.ww, i, j)
                         for i in range(self.wh.kernel) for j in range(self.ww.kernel)]
            self.tap_index = tap_indices(self.wh, self.ww, bool(self.attrs.storage_order)).ravel()
            self.plane = (np.arange(n)[:, None] * c + np.arange(c)[None, :])[:, None, None, :] * (h * w)
            self.position = (np.arange(self.wh.out)[:, None] * self.ww.out + np.arange(self.ww.out))[..., None]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outputs[0]
        if self.attrs.global_pool:
            self.global_pool(x, out)
        else:
            if self.pad is not None:
                self.pad()
            if self.lp:
                lp_power(self.attrs.p)(self.source)
            combine = np.maximum if self.attrs.mode == fb.PoolMode.MAX else np.add
            pool_taps(self.row_taps, self.rows, combine)
            pool_taps(self.col_taps, out, combine)
            if self.scale is not None:
                out *= self.scale
            if self.lp:
                lp_root(out, self.attrs.p)
            if self.indices:
                self.argmax(out, outputs[1])
        finish(out, None, self.activation)

    def global_pool(self, x: np.ndarray, out: np.ndarray) -> None:
        if self.lp:
            powered = x.astype(x.dtype, copy=True)
            lp_power(self.attrs.p)(powered)
            np.sum(powered, axis=(1, 2), keepdims=True, out=out)
            lp_root(out, self.attrs.p)
        else:
            (np.mean if self.average else np.max)(x, axis=(1, 2), keepdims=True, out=out)

    def argmax(self, out: np.ndarray, indices: np.ndarray) -> None:
        """indices = the NCHW flat index of the first tap (in H, W order) that holds each maximum `out`."""
        indices.fill(len(self.taps) - 1)
        for k in range(len(self.taps) - 2, -1, -1):          # later taps first, so the first one wins ties
            np.copyto(indices, k, where=self.taps[k] == out)
        indices *= self.wh.out * self.ww.out
        indices += self.position
        indices[...] = self.tap_index[indices]
        indices += self.plane
