"""RMSNormGrad: with r = invrms per row and xhat = x * r, y = xhat * scale:
    dscale = sum over rows of dy * xhat (summed to scale's shape),  g = dy * scale,
    dx = r * (g - xhat * mean(g * xhat))   (LayerNorm's rule without the mean terms)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to
from lite.kernels.rms_norm import normalised_rows


@register("RMSNormGrad", DataType.FLOAT32)
class RMSNormGradKernel(Kernel):
    """inputs: dy, x, scale, invrms (the forward's extra output) -> dx, dscale."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, scale, invrms = inputs[:4]
        rows, self.inner = normalised_rows(self, x, scale)
        if dy.shape != x.shape or int(np.prod(invrms.shape, dtype=np.int64)) != rows:
            raise self.error(f"needs dy like x {list(x.shape)} and {rows} invrms values, got "
                             f"{list(dy.shape)}, {list(invrms.shape)}")
        if len(self.node.outputs) != 2:
            raise self.error(f"has outputs dx, dscale, not {len(self.node.outputs)}")
        self.shape2d = (rows, int(np.prod(self.inner, dtype=np.int64)))
        self.param_axes = broadcast_axes(scale.shape, self.inner)
        return [TensorSpec(x.shape, dy.dtype), TensorSpec(scale.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        f32 = np.dtype(np.float32)
        return [TensorSpec(self.shape2d, f32), TensorSpec(self.shape2d, f32), TensorSpec(self.shape2d[:1], f32),
                TensorSpec((self.shape2d[1],), f32)]

    def bind(self, inputs, outputs, scratch) -> None:
        rows, size = self.shape2d
        self.dy, self.x, self.dx = (a.reshape(rows, size) for a in (inputs[0], inputs[1], outputs[0]))
        self.invrms = inputs[3].reshape(rows, 1)
        self.xhat, self.g, self.gx_mean, self.dscale = scratch
        self.g_inner, self.dy_inner = self.g.reshape(rows, *self.inner), inputs[0].reshape(rows, *self.inner)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        xhat, g = self.xhat, self.g
        np.multiply(self.x, self.invrms, out=xhat)
        np.einsum("mk,mk->k", self.dy, xhat, out=self.dscale)
        sum_to(self.dscale.reshape(self.inner), self.param_axes, outputs[1])
        np.multiply(self.dy_inner, inputs[2], out=self.g_inner)
        np.einsum("mk,mk->m", g, xhat, out=self.gx_mean)
        xhat *= (self.gx_mean / self.shape2d[1])[:, None]
        np.subtract(g, xhat, out=self.dx)
        self.dx *= self.invrms
