"""GroupNormGrad: the gradient of GroupNorm, the rule BatchNorm and LayerNorm share (batchnorm_grad.py) over each
sample's group: with xhat = (x - mean) * invstd and g = dy * scale, dbias = sum(dy), dscale = sum(dy * xhat) per
channel and dx = invstd * (g - mean(g) - xhat * mean(g * xhat)), the means over the group."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.grad.batchnorm_grad import normalised
from lite.kernels.group_norm import STAT_AXES, check_group_attrs, grouped_shape


@register("GroupNormGrad", DataType.FLOAT32)
class GroupNormGradKernel(Kernel):
    """inputs: dy, x, scale [C], mean, invstd ([N, num_groups], the training forward's extra outputs) -> dx,
    dscale [C], dbias [C]."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, scale, mean, invstd = inputs[:5]
        axis, groups = check_group_attrs(self, x)
        stats = (x.shape[0], groups)
        if dy.shape != x.shape or scale.shape != (x.shape[axis],) or mean.shape != stats or invstd.shape != stats:
            raise self.error(f"needs dy like x {list(x.shape)}, scale [{x.shape[axis]}] and mean, invstd "
                             f"{list(stats)}, got {[list(p.shape) for p in (dy, scale, mean, invstd)]}")
        self.view = grouped_shape(x.shape, axis, groups)
        return [TensorSpec(x.shape, dy.dtype), TensorSpec(scale.shape, dy.dtype), TensorSpec(scale.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        n, a, groups, cg, b = self.view
        dy, x = (t.reshape(self.view) for t in inputs[:2])
        mean, invstd = (t.reshape(n, 1, groups, 1, 1) for t in inputs[3:5])
        xhat = np.empty(self.view, np.float32)
        normalised(x, mean, invstd, xhat)
        np.einsum("nagcb,nagcb->gc", dy, xhat, out=outputs[1].reshape(groups, cg))      # dscale
        np.einsum("nagcb->gc", dy, out=outputs[2].reshape(groups, cg))                  # dbias
        g = np.multiply(dy, inputs[2].reshape(1, 1, groups, cg, 1))
        count = a * cg * b
        g_mean = np.add.reduce(g, axis=STAT_AXES, keepdims=True) / count
        gx_mean = np.einsum("nagcb,nagcb->ng", g, xhat)[:, None, :, None, None] / count
        xhat *= gx_mean
        xhat += g_mean
        dx = outputs[0].reshape(self.view)
        np.subtract(g, xhat, out=dx)
        dx *= invstd
