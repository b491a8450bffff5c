"""Gradients of the normalisation ops: BatchNormGrad, LayerNormGrad and LRNGrad.

BatchNorm and LayerNorm share one rule. With xhat = (x - mean) * invstd normalised over a set of m values
(per channel for BatchNorm, per row for LayerNorm) and g = dy * scale:
    dbias = sum(dy), dscale = sum(dy * xhat)            (summed where the parameter is broadcast)
    dx = invstd * (g - mean(g) - xhat * mean(g * xhat))  (means over the normalised set)
For BatchNorm scale is constant over the set, so dx = scale * invstd * (dy - (dbias + xhat * dscale) / m).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import as_channels, channel_dots, channel_sums, column_sums, row_sums
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to
from lite.status import InvalidOpAttrError


def normalised(x: np.ndarray, mean: np.ndarray, invstd: np.ndarray, out: np.ndarray) -> None:
    """out = (x - mean) * invstd, the statistics broadcasting against x."""
    np.subtract(x, mean, out=out)
    out *= invstd


@register("BatchNormGrad", DataType.FLOAT32)
class BatchNormGradKernel(Kernel):
    """inputs: dy, x, scale [C], saved_mean [C], saved_invstd [C] (the training forward's outputs) ->
    dx (x's shape), dscale [C], dbias [C]; C along `axis`."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, scale, mean, invstd = inputs[:5]
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        self.axis = self.attrs.axis % x.rank
        channels = x.shape[self.axis]
        if dy.shape != x.shape or any(p.shape != (channels,) for p in (scale, mean, invstd)):
            raise self.error(f"needs dy like x {list(x.shape)} and scale, saved_mean, saved_invstd of shape "
                             f"[{channels}], got {[list(p.shape) for p in (dy, scale, mean, invstd)]}")
        self.x_shape = x.shape
        param = TensorSpec((channels,), dy.dtype)
        return [TensorSpec(x.shape, dy.dtype), param, param]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.x_shape, np.dtype(np.float32))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.dy, self.x, self.dx, self.centred = (as_channels(a, self.axis) for a in (*inputs[:2], outputs[0],
                                                                                       scratch[0]))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        scale, mean, invstd = inputs[2:5]
        _, dscale, dbias = outputs
        centred, dy, dx = self.centred, self.dy, self.dx
        m = self.x.size // self.x.shape[1]
        np.subtract(self.x, mean[:, None], out=centred)        # xhat = centred * invstd, never materialised
        channel_sums(dy, dbias)
        channel_dots(dy, centred, dscale)
        dscale *= invstd
        k = scale * invstd
        centred *= (k * invstd * dscale / m)[:, None]
        centred += (k * dbias / m)[:, None]
        np.multiply(dy, k[:, None], out=dx)
        dx -= centred


@register("LayerNormGrad", DataType.FLOAT32)
class LayerNormGradKernel(Kernel):
    """inputs: dy, x, scale, mean, invstd (the forward's extra outputs, x.shape[:axis] + ones) -> dx, dscale
    (scale's shape) and optionally dbias (also scale's shape: the bias gradient summed to it)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, scale, mean, invstd = inputs[:5]
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        axis = self.attrs.axis % x.rank
        self.inner = x.shape[axis:]
        rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        if (dy.shape != x.shape or np.broadcast_shapes(self.inner, scale.shape) != self.inner
                or any(int(np.prod(s.shape, dtype=np.int64)) != rows for s in (mean, invstd))):
            raise self.error(f"needs dy like x {list(x.shape)}, scale broadcasting to {list(self.inner)} and "
                             f"{rows} means and invstds, got {[list(p.shape) for p in (dy, scale, mean, invstd)]}")
        if len(self.node.outputs) not in (2, 3):
            raise self.error(f"has outputs dx, dscale[, dbias], not {len(self.node.outputs)}")
        self.shape2d = (rows, int(np.prod(self.inner, dtype=np.int64)))
        self.param_axes = broadcast_axes(scale.shape, self.inner)
        param = TensorSpec(scale.shape, dy.dtype)
        return [TensorSpec(x.shape, dy.dtype)] + [param] * (len(self.node.outputs) - 1)

    def scratch(self) -> list[TensorSpec]:
        f32 = np.dtype(np.float32)
        unreduced = [TensorSpec(self.inner, f32)] * (len(self.node.outputs) - 1) if self.param_axes else []
        return [TensorSpec(self.shape2d, f32), TensorSpec(self.shape2d, f32), TensorSpec(self.shape2d[:1], f32),
                TensorSpec(self.shape2d[:1], f32)] + unreduced

    def bind(self, inputs, outputs, scratch) -> None:
        rows, size = self.shape2d
        self.dy, self.x, self.dx = (a.reshape(rows, size) for a in (inputs[0], inputs[1], outputs[0]))
        self.mean, self.invstd = (a.reshape(rows, 1) for a in inputs[3:5])
        self.xhat, self.g, self.g_mean, self.gx_mean = scratch[:4]
        self.g_inner = self.g.reshape(rows, *self.inner)
        self.dy_inner = inputs[0].reshape(rows, *self.inner)
        self.unreduced = [a.reshape(size) for a in (scratch[4:] if self.param_axes else outputs[1:])]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        xhat, g, size = self.xhat, self.g, self.shape2d[1]
        normalised(self.x, self.mean, self.invstd, xhat)
        np.einsum("mk,mk->k", self.dy, xhat, out=self.unreduced[0])        # dscale
        if len(self.unreduced) > 1:
            column_sums(self.dy, self.unreduced[1])                          # dbias
        if self.param_axes:
            for full, out in zip(self.unreduced, outputs[1:]):
                sum_to(full.reshape(self.inner), self.param_axes, out)
        np.multiply(self.dy_inner, inputs[2], out=self.g_inner)
        row_sums(g, self.g_mean)
        np.einsum("mk,mk->m", g, xhat, out=self.gx_mean)
        xhat *= (self.gx_mean / size)[:, None]
        xhat += (self.g_mean / size)[:, None]
        np.subtract(g, xhat, out=self.dx)
        self.dx *= self.invstd


def window_sums(v: np.ndarray, before: int, size: int, buffer: np.ndarray, out: np.ndarray) -> None:
    """out[..., c] = sum of v[..., c - before : c - before + size] over the channels that exist (last axis);
    `buffer` is [..., C + size - 1]; `out` may be `v`."""
    channels = v.shape[-1]
    buffer[..., :before] = 0.0
    buffer[..., before + channels:] = 0.0
    np.copyto(buffer[..., before:before + channels], v)
    np.copyto(out, buffer[..., :channels])
    for k in range(1, size):
        out += buffer[..., k:k + channels]


@register("LRNGrad", DataType.FLOAT32)
class LRNGradKernel(Kernel):
    """inputs: dy, x, y (NHWC, the forward's input and output) -> dx. With s = bias + alpha / size * (sum of x^2
    over the window of c, channels [c - (size-1)//2, c + size//2]), y = x * s^-beta:
    dx_c = dy_c * s_c^-beta - 2 * alpha * beta / size * x_c * sum over windows containing c of dy * y / s."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, y = inputs[:3]
        if x.rank != 4 or dy.shape != x.shape or y.shape != x.shape:
            raise self.error(f"needs 4-D NHWC dy, x and y of one shape, got {[list(t.shape) for t in inputs[:3]]}")
        if self.attrs.size < 1:
            raise self.error(f"size must be positive, got {self.attrs.size}", InvalidOpAttrError)
        self.x_shape = x.shape
        return [TensorSpec(x.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        f32 = np.dtype(np.float32)
        padded = self.x_shape[:-1] + (self.x_shape[-1] + self.attrs.size - 1,)
        return [TensorSpec(padded, f32), TensorSpec(self.x_shape, f32), TensorSpec(self.x_shape, f32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x, y = inputs[:3]
        dx = outputs[0]
        a = self.attrs
        buffer, s, t = self.work
        np.square(x, out=s)
        window_sums(s, (a.size - 1) // 2, a.size, buffer, s)
        s *= a.alpha / a.size
        s += a.bias
        np.divide(y, s, out=t)
        t *= dy
        window_sums(t, a.size // 2, a.size, buffer, t)         # the windows that contain each channel
        t *= x
        t *= 2.0 * a.alpha * a.beta / a.size
        np.power(s, -a.beta, out=s)
        np.multiply(dy, s, out=dx)
        dx -= t
