"""BatchNormGrad, and the normalisation rule it shares with LayerNormGrad (`layer_norm_grad`).

BatchNorm and LayerNorm share one rule. With xhat = (x - mean) * invstd normalised over a set of m values
(per channel for BatchNorm, per row for LayerNorm) and g = dy * scale:
    dbias = sum(dy), dscale = sum(dy * xhat)            (summed where the parameter is broadcast)
    dx = invstd * (g - mean(g) - xhat * mean(g * xhat))  (means over the normalised set)
For BatchNorm scale is constant over the set, so dx = scale * invstd * (dy - (dbias + xhat * dscale) / m).
With the compiled kernels a channels-last BatchNormGrad is two threaded passes instead of seven numpy ones
(`compiled.grad.batchnorm_grad`, sums in float64): 2.2 -> 0.4 ms on one thread for MobileNetV2's
[32, 16, 16, 96] at 32x32 input.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels import compiled
from lite.kernels._reduce_math import as_channels, channel_dots, channel_sums
from lite.status import InvalidOpAttrError

SUM_BLOCKS = 8      # row blocks of the compiled kernel's partial sums (fixed: results independent of threads)


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
        self.use_compiled = self.axis == x.rank - 1 and 0 not in x.shape and compiled.enabled()
        param = TensorSpec((channels,), dy.dtype)
        return [TensorSpec(x.shape, dy.dtype), param, param]

    def scratch(self) -> list[TensorSpec]:
        if self.use_compiled:
            return [TensorSpec((SUM_BLOCKS, 2, self.x_shape[-1]), np.dtype(np.float64))]
        return [TensorSpec(self.x_shape, np.dtype(np.float32))]

    def bind(self, inputs, outputs, scratch) -> None:
        arrays = [*inputs[:5], *outputs]
        self.compiled = self.use_compiled and all(a.flags.c_contiguous for a in arrays)
        if self.compiled:
            from lite.kernels.compiled import grad
            rows = [a.reshape(-1, self.x_shape[-1]) for a in (inputs[0], inputs[1])]
            self.call = grad.batchnorm_grad.bind(inputs[1].size, *rows, *inputs[2:5],
                                                 outputs[0].reshape(rows[0].shape), *outputs[1:], scratch[0])
            return
        self.dy, self.x, self.dx, self.centred = (as_channels(a, self.axis) for a in (*inputs[:2], outputs[0],
                                                                                       scratch[0]))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.compiled:
            self.call()
            return
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
