"""GRUGrad: backpropagation through time of `lite/kernels/gru.py`.

    dh~ = dh * (1 - z)   dz = dh * (h_prev - h~)   dpre_h = dh~ * g'      dh_prev = dh * z + ...
    linear_before_reset = 1, q = h_prev Rh + Rb_h:  dr = dpre_h * q,  dq = dpre_h * r   (drec = dz, dr, dq)
    linear_before_reset = 0:  d(r h) = dpre_h Rh,  dr = d(r h) * h_prev,  dh_prev += d(r h) * r
"""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentGradKernel
from lite.kernels.gru import GRUKernel


@register("GRUGrad", DataType.FLOAT32)
class GRUGradKernel(RecurrentGradKernel, GRUKernel):
    separate_drec = True

    def prepare_grad(self, pre, prev, r, b, d, ins) -> None:
        n = self.H
        f, g = self.acts[d]
        self.value = np.concatenate([f(pre[..., :2 * n]), g(pre[..., 2 * n:])], axis=-1)     # z, r, h~
        self.slope = np.concatenate([f.grad(pre[..., :2 * n]), g.grad(pre[..., 2 * n:])], axis=-1)
        if self.attrs.linear_before_reset:       # q for every step: one matmul
            self.q = prev @ r[2 * n:].T + (0 if b is None else b[d, 5 * n:])

    def step_grad(self, t, d, dnew, prev, r, ins) -> np.ndarray:
        n, v, s = self.H, self.value[t], self.slope[t]
        dpre, drec = self.dpre[t, :, d], self.drec[t, :, d]
        z, reset, cand = v[:, :n], v[:, n:2 * n], v[:, 2 * n:]
        np.multiply(dnew * (1 - z), s[:, 2 * n:], out=dpre[:, 2 * n:])
        dpre[:, :n] = dnew * (prev - cand) * s[:, :n]
        back = dnew * z
        if self.attrs.linear_before_reset:
            dpre[:, n:2 * n] = dpre[:, 2 * n:] * self.q[t] * s[:, n:2 * n]
            drec[:, :2 * n] = dpre[:, :2 * n]
            np.multiply(dpre[:, 2 * n:], reset, out=drec[:, 2 * n:])
            back += drec @ r
        else:
            drh = dpre[:, 2 * n:] @ r[2 * n:]
            dpre[:, n:2 * n] = drh * prev * s[:, n:2 * n]
            drec[:] = dpre
            back += drh * reset + dpre[:, :2 * n] @ r[:2 * n]
        return back

    def weight_grads(self, d, prev, grads, ins) -> None:
        super().weight_grads(d, prev, grads, ins)
        if not self.attrs.linear_before_reset:   # Rh multiplies r * h_prev
            n = self.H
            rh = (self.value[..., n:2 * n] * prev).reshape(-1, n)
            grads[2][d, 2 * n:] = self.drec[:, :, d, 2 * n:].reshape(-1, n).T @ rh
