"""LRNGrad: the gradient of local response normalisation across channels."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


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
