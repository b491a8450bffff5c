"""LSTMGrad: backpropagation through time of `lite/kernels/lstm.py` (its equations, read backwards).

    do = dh * h(c)            dc += dh * o * h'(c) + dpre_o * Po
    di = dc * c~              dc~ = dc * i            df = dc * c_prev   (input_forget: di -= df)
    dc_prev = dc * f + dpre_i * Pi + dpre_f * Pf      dh_prev = dpre R
"""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentGradKernel
from lite.kernels.lstm import LSTMKernel


@register("LSTMGrad", DataType.FLOAT32)
class LSTMGradKernel(RecurrentGradKernel, LSTMKernel):
    def prepare_grad(self, pre, prev, r, b, d, ins) -> None:
        n = self.H
        f, g, h = self.acts[d]
        self.value = np.empty(pre.shape, np.float32)     # i, o, f, c~
        self.slope = np.empty(pre.shape, np.float32)     # their derivatives
        for fn, part in ((f, slice(0, 3 * n)), (g, slice(3 * n, 4 * n))):
            self.value[..., part], self.slope[..., part] = fn(pre[..., part]), fn.grad(pre[..., part])
        if self.attrs.input_forget:
            self.value[..., 2 * n:3 * n] = 1 - self.value[..., :n]
        i, ft, c = self.value[..., :n], self.value[..., 2 * n:3 * n], self.value[..., 3 * n:]
        self.cell = ft * prev[..., n:] + i * c                 # c_t (before the sequence_lens hold)
        self.hc, self.dhc = h(self.cell), h.grad(self.cell)
        self.peep = None if ins[7] is None else ins[7][d]

    def step_grad(self, t, d, dnew, prev, r, ins) -> np.ndarray:
        n, v, s = self.H, self.value[t], self.slope[t]
        dh, dc = dnew[:, :n], dnew[:, n:]
        dpre = self.dpre[t, :, d]
        dpre[:, n:2 * n] = dh * self.hc[t] * s[:, n:2 * n]                     # o
        dcell = dc + dh * v[:, n:2 * n] * self.dhc[t]
        if self.peep is not None:
            dcell += dpre[:, n:2 * n] * self.peep[n:2 * n]
        df = dcell * prev[:, n:]
        di = dcell * v[:, 3 * n:]
        if self.attrs.input_forget:
            di -= df
            df = 0
        dpre[:, :n] = di * s[:, :n]
        dpre[:, 2 * n:3 * n] = df * s[:, 2 * n:3 * n]
        dpre[:, 3 * n:] = dcell * v[:, :n] * s[:, 3 * n:]
        back = np.empty_like(dnew)
        np.multiply(dcell, v[:, 2 * n:3 * n], out=back[:, n:])
        if self.peep is not None:
            back[:, n:] += dpre[:, :n] * self.peep[:n] + dpre[:, 2 * n:3 * n] * self.peep[2 * n:]
        np.matmul(dpre, r, out=back[:, :n])
        return back

    def weight_grads(self, d, prev, grads, ins) -> None:
        super().weight_grads(d, prev, grads, ins)
        if ins[7] is not None:
            n, dpre = self.H, self.dpre[:, :, d]
            c_prev = prev[..., n:]
            grads[7][d] = np.concatenate([(dpre[..., :n] * c_prev).sum(axis=(0, 1)),
                                          (dpre[..., n:2 * n] * self.cell).sum(axis=(0, 1)),
                                          (dpre[..., 2 * n:3 * n] * c_prev).sum(axis=(0, 1))])
