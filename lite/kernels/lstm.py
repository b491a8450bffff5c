"""LSTM (ONNX): gates i, o, f, c in W, R and B; peepholes P = (Pi, Po, Pf); activations f, g, h per direction.

    i = f(x Wi + h Ri + Pi * c_prev + b_i)      f = f(... + Pf * c_prev)  (input_forget: f = 1 - i)
    c~ = g(x Wc + h Rc + b_c)                   c = f * c_prev + i * c~
    o = f(x Wo + h Ro + Po * c + b_o)           h = o * h(c)
"""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentKernel
from lite.traits import TrainMode, declare

declare("LSTM", train=TrainMode(outputs=("Y_h", "Y_c", "gates", "states")))


@register("LSTM", DataType.FLOAT32)
class LSTMKernel(RecurrentKernel):
    gates, states, functions = 4, 2, 3
    unclipped = (2,)

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        n = self.H
        f, g, h = self.acts[d]
        peep, a = ins[7], self.act
        c_prev, c = prev[:, n:], cur[:, n:]
        np.matmul(prev[:, :n], r.T, out=self.tmp)
        pre += self.tmp
        if peep is not None:
            pre[:, :n] += peep[d, :n] * c_prev
            pre[:, 2 * n:3 * n] += peep[d, 2 * n:] * c_prev
        f(pre[:, :n], a[:, :n])
        if self.attrs.input_forget:
            np.subtract(1, a[:, :n], out=a[:, 2 * n:3 * n])
        else:
            f(pre[:, 2 * n:3 * n], a[:, 2 * n:3 * n])
        g(pre[:, 3 * n:], a[:, 3 * n:])
        np.multiply(a[:, 2 * n:3 * n], c_prev, out=c)
        c += a[:, :n] * a[:, 3 * n:]
        if peep is not None:
            pre[:, n:2 * n] += peep[d, n:2 * n] * c
        f(pre[:, n:2 * n], a[:, n:2 * n])
        np.multiply(a[:, n:2 * n], h(c), out=cur[:, :n])
