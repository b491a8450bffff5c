"""LSTM (ONNX): gates i, o, f, c in W, R and B; peepholes P = (Pi, Po, Pf); activations f, g, h per direction.

    i = f(x Wi + h Ri + Pi * c_prev + b_i)      f = f(... + Pf * c_prev)  (input_forget: f = 1 - i)
    c~ = g(x Wc + h Rc + b_c)                   c = f * c_prev + i * c~
    o = f(x Wo + h Ro + Po * c + b_o)           h = o * h(c)

With four more inputs (W_scale, W_zero_point, R_scale, R_zero_point: per direction [D] or per gate column
[D, 4H]) W and R hold int8 / uint8 weights and the products run as onnxruntime's DynamicQuantizeLSTM runs them:
X (its first max(sequence_lens) steps, all at once) and each step's h_{t-1} (the whole batch) are quantized to
uint8 with DynamicQuantizeLinear's range and rounding, the products summed exactly in integers and scaled by the
two scales in float32, the bias added after the recurrent term. As onnxruntime on one thread groups the rows
it quantizes together (on several threads it quantizes h per block of batch rows): with sequences of unequal
lengths a reverse direction walks each row from its own end, and a row that has ended counts as zeros (as when
the node outputs Y; without Y onnxruntime keeps its last state there).
"""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentKernel
from lite.kernels.dynamic_quantize import QMAX
from lite.traits import TrainMode, declare

declare("LSTM", train=TrainMode(outputs=("Y_h", "Y_c", "gates", "states")))


@register("LSTM", DataType.FLOAT32)
class LSTMKernel(RecurrentKernel):
    gates, states, functions = 4, 2, 3
    unclipped = (2,)

    def check_inputs(self, inputs) -> None:
        super().check_inputs(inputs)
        self.quantized = len(inputs) > 8 and inputs[8] is not None

    def run(self, inputs, outputs) -> None:
        if self.quantized:
            w_scale, w_zero, r_scale, r_zero = inputs[8:12]
            self.w_levels = self._levels(inputs[1], w_zero)
            self.r_levels = self._levels(inputs[2], r_zero)
            self.w_scale, self.r_scale = (s.astype(np.float32).reshape(self.D, -1) for s in (w_scale, r_scale))
        super().run(inputs[:8], outputs)

    def _levels(self, q: np.ndarray, zero: np.ndarray) -> np.ndarray:
        """Weights [D, 4H, in] as integer levels q - zero point, in float64 (its products and sums are exact)."""
        return q.astype(np.float64) - zero.astype(np.float64).reshape(self.D, -1, 1)

    def project(self, x, w, bias) -> None:
        if not self.quantized:
            super().project(x, w, bias)
            return
        self.bias = bias
        lens = self.lens
        steps = self.T if lens is None else int(lens.max(initial=0))
        pre = self.gates_buf.reshape(self.T, self.B, self.D, -1)
        pre[steps:] = 0
        levels, scale = _quantized(x[:steps])
        products = levels.reshape(-1, self.I) @ self.w_levels.reshape(-1, self.I).T
        np.multiply(products.astype(np.float32).reshape(steps, self.B, self.D, -1), scale * self.w_scale,
                    out=pre[:steps])

    def mask(self, lens):
        self.lens = lens
        return super().mask(lens)

    def loop(self, d, r, b, ins, init, mask) -> None:
        """Quantized with sequences of unequal lengths, onnxruntime's order: at step s row b is at time s (reverse:
        len[b] - 1 - s), and h is quantized over the batch with a row that ended before the previous step as
        zeros; times past a row's length keep its state as the float loop keeps it."""
        if not self.quantized or mask is None:
            super().loop(d, r, b, ins, init, mask)
            return
        lens, rows, n = self.lens.astype(np.int64), np.arange(self.B), self.H
        prev = init.copy()
        for s in range(int(lens.max(initial=0))):
            live = s < lens
            times = np.clip(lens - 1 - s if self.reverse(d) else np.full(self.B, s), 0, self.T - 1)
            seen = prev.copy()
            seen[s > lens, :n] = 0
            pre, cur = self.gates_buf[times, rows, d], np.empty_like(prev)
            self.step(pre, seen, cur, r, b, ins, d)
            prev[live] = cur[live]
            self.states_buf[times[live], rows[live], d] = cur[live]
        for row in rows:                     # the times past each row's length
            self.states_buf[lens[row]:, row, d] = init[row] if self.reverse(d) else prev[row]

    def add_recurrent(self, pre: np.ndarray, h: np.ndarray, r: np.ndarray, d: int) -> None:
        """pre += h R^T (+ the bias, after it, when the weights are quantized)."""
        if not self.quantized:
            np.matmul(h, r.T, out=self.tmp)
            pre += self.tmp
            return
        levels, scale = _quantized(h)
        pre += (levels @ self.r_levels[d].T).astype(np.float32) * (scale * self.r_scale[d])
        if self.bias is not None:
            pre += self.bias[d]

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        n = self.H
        f, g, h = self.acts[d]
        peep, a = ins[7], self.act
        c_prev, c = prev[:, n:], cur[:, n:]
        self.add_recurrent(pre, prev[:, :n], r, d)
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


def _quantized(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """x as uint8 levels minus their zero point (float64) and its scale: the range [min(x, 0), max(x, 0)] over
    [0, 255] and rounding half to even, in float32 as DynamicQuantizeLinear computes them."""
    low, high = np.float32(min(x.min(initial=0.0), 0.0)), np.float32(max(x.max(initial=0.0), 0.0))
    scale = np.float32(1.0) if high == low else (high - low) / np.float32(QMAX)
    zero = np.rint(np.clip(np.float32(0.0) - low / scale, np.float32(0.0), np.float32(QMAX)))
    q = np.clip(np.rint(x / scale) + zero, 0.0, QMAX)
    return q.astype(np.float64) - np.float64(zero), scale
