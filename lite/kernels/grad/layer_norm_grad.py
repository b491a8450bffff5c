"""LayerNormGrad: the rule of `batchnorm_grad` (see there) over each row's normalised values."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import column_sums, row_sums
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to
from lite.kernels.grad.batchnorm_grad import normalised
from lite.status import InvalidOpAttrError


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
