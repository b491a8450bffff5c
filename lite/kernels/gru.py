"""GRU (ONNX): gates z, r, h in W, R and B; activations f, g per direction.

    z = f(x Wz + h Rz + b_z)     r = f(x Wr + h Rr + b_r)
    h~ = g(x Wh + (r * h) Rh + Rb_h + Wb_h)          linear_before_reset = 0
    h~ = g(x Wh + r * (h Rh + Rb_h) + Wb_h)          linear_before_reset = 1
    h = (1 - z) * h~ + z * h_prev
"""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentKernel
from lite.traits import TrainMode, declare

declare("GRU", train=TrainMode(outputs=("Y_h", "gates", "states")))


@register("GRU", DataType.FLOAT32)
class GRUKernel(RecurrentKernel):
    gates, states, functions = 3, 1, 2

    def folded_bias(self, b: np.ndarray | None) -> np.ndarray | None:
        folded = super().folded_bias(b)
        if folded is not None and self.attrs.linear_before_reset:
            folded[:, 2 * self.H:] = b[:, 2 * self.H:3 * self.H]      # Rb_h is added inside r * (...)
        return folded

    def recurrent(self, h: np.ndarray, r: np.ndarray, d: int, rows: slice, out: np.ndarray) -> None:
        """out = h R[rows]^T of direction d (the quantized kernel multiplies in integers instead)."""
        np.matmul(h, r[rows].T, out=out)

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        n = self.H
        f, g = self.acts[d]
        a, tmp = self.act, self.tmp
        if self.attrs.linear_before_reset:
            self.recurrent(prev, r, d, slice(None), tmp)
            if b is not None:
                tmp[:, 2 * n:] += b[d, 5 * n:]
            pre[:, :2 * n] += tmp[:, :2 * n]
            f(pre[:, :2 * n], a[:, :2 * n])
            pre[:, 2 * n:] += a[:, n:2 * n] * tmp[:, 2 * n:]
        else:
            self.recurrent(prev, r, d, slice(0, 2 * n), tmp[:, :2 * n])
            pre[:, :2 * n] += tmp[:, :2 * n]
            f(pre[:, :2 * n], a[:, :2 * n])
            self.recurrent(a[:, n:2 * n] * prev, r, d, slice(2 * n, None), tmp[:, 2 * n:])
            pre[:, 2 * n:] += tmp[:, 2 * n:]
        cand = g(pre[:, 2 * n:], a[:, 2 * n:])
        np.subtract(prev, cand, out=cur)
        cur *= a[:, :n]
        cur += cand
