"""BatchNormGrad, and the normalisation rule it shares with LayerNormGrad (`layer_norm_grad`).

BatchNorm and LayerNorm share one rule. With xhat = (x - mean) * invstd normalised over a set of m values
(per channel for BatchNorm, per row for LayerNorm) and g = dy * scale:
    dbias = sum(dy), dscale = sum(dy * xhat)            (summed where the parameter is broadcast)
    dx = invstd * (g - mean(g) - xhat * mean(g * xhat))  (means over the normalised set)
For BatchNorm scale is constant over the set, so dx = scale * invstd * (dy - (dbias + xhat * dscale) / m).
The compiled sibling (`compiled/batchnorm_grad.py`) runs a channels-last BatchNormGrad as two threaded
passes instead of seven numpy ones.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import as_channels, channel_dots, channel_sums
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
