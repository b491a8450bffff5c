"""int8 LSTM and GRU of fully quantized models, as TFLite's integer LSTM splits the work: the input and hidden
projections in integers, the gates in float.

X is int8 with its tensor's params; W and R are int8, symmetric, one scale per gate row (axis 1 of [D, G*H, in],
shared by the directions); B and the peepholes stay float32. X W^T sums exact integer products (int32
accumulators' values, in float32 where no sum can pass 2^24, else float64) and is scaled by s_x * s_w[row]; so is every step's h R^T, with h the
output Y's int8 levels: after each step h is rounded to Y's grid, as TFLite keeps the hidden state in the
output's params, so the state the next step reads is the int8 value Y holds. Gates, the cell state (TFLite:
int16) and the nonlinearities are float32. Y_h and Y_c are quantized to their own params at the end; initial
states are read as int8 (their params) or float constants.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.gru import GRUKernel
from lite.kernels.int8.common import EXACT_F32, Quant, input_quant, output_quant
from lite.kernels.lstm import LSTMKernel
from lite.status import NotSupportedError

STATES = (5, 6)                 # initial_h, initial_c


class Int8Recurrent(Kernel):
    """What the int8 LSTM and GRU add to their float kernels (a mixin placed first)."""

    float_inputs = (3, 5, 6, 7)         # B, constant initial states and peepholes stay float32 (converter/quant)
    row_weights = (1, 2)                # W and R: int8 with a scale per gate row (converter/quant)

    @classmethod
    def accepts(cls, attrs: Mapping[str, Any], n_outputs: int) -> bool:
        return n_outputs == 1 + cls.states          # inference: no training outputs

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        specs = super().infer(inputs)
        if self.training:
            raise self.error("int8 recurrent ops run inference only", NotSupportedError)
        self.qx = input_quant(self, inputs[0], "X")
        self.levels, self.scales = [], []
        for index, what in ((1, "W"), (2, "R")):
            w = inputs[index]
            params = w.quant or []
            if w.value is None or w.dtype != np.int8 or len(params) != w.shape[1]:
                raise self.error(f"int8 {self.node.op} needs a constant int8 {what} with one scale per gate row "
                                 f"({w.shape[1]}), it has {len(params)}", NotSupportedError)
            self.levels.append(w.value.astype(np.float64))
            self.scales.append(np.array([p.scale for p in params], np.float64))
        # float32 products are exact when every sum of |x - zp_x| * |w| stays below 2^24 (X W^T over `I`)
        self.x_dtype = np.float32 if self.I * 255 * 127 < EXACT_F32 else np.float64
        self.w_levels = self.levels[0].reshape(-1, self.I).T.astype(self.x_dtype)
        self.out_q = [output_quant(self, inputs[0].dtype, k) for k in range(1 + self.states)]
        self.state_q: list[Quant | None] = [
            input_quant(self, inputs[k], "an initial state")
            if k < len(inputs) and inputs[k] is not None and inputs[k].dtype == np.int8 else None for k in STATES]
        self.w_scale = (self.qx.scale * self.scales[0]).astype(np.float32)
        self.r_scale = (self.out_q[0].scale * self.scales[1]).astype(np.float32)
        return specs

    def scratch(self) -> list[TensorSpec]:
        return super().scratch() + self._float_outputs()

    def _float_outputs(self) -> list[TensorSpec]:
        """Y, Y_h (and Y_c) in float32, quantized into the outputs at the end of a run."""
        y = (self.T, self.D, self.B, self.H) if self.attrs.layout == 0 else (self.B, self.T, self.D, self.H)
        return [TensorSpec(y, np.dtype(np.float32))] + [TensorSpec(self._state_shape(), np.dtype(np.float32))] * \
            self.states

    def bind(self, inputs, outputs, scratch) -> None:
        n = 1 + self.states
        super().bind(inputs, outputs, scratch[:-n])
        self.float_out = scratch[-n:]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        ins = list(inputs) + [None] * (8 - len(inputs))
        for k, q in zip(STATES, self.state_q):
            if q is not None and ins[k] is not None:
                ins[k] = ((ins[k].astype(np.float32) - q.zero_point) * np.float32(q.scale))
        super().run(ins, self.float_out)
        for real, out, q in zip(self.float_out, outputs, self.out_q):
            np.copyto(out, np.clip(np.rint(real / np.float32(q.scale)) + q.zero_point, q.lo, q.hi),
                      casting="unsafe")

    def project(self, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> None:
        """gates = (x - zp_x) W^T in integers, times s_x * s_w[row], plus the float bias."""
        pre = self.gates_buf.reshape(self.T, self.B, self.D, -1)
        levels = x.reshape(-1, self.I).astype(self.x_dtype) - self.x_dtype(self.qx.zero_point)
        products = levels @ self.w_levels                                       # [T*B, D*G*H], exact
        np.multiply(products.reshape(pre.shape), self.w_scale, out=pre, casting="unsafe")
        if bias is not None:
            self.gates_buf += bias[None, None]

    def hidden_product(self, h: np.ndarray, d: int, rows: slice) -> np.ndarray:
        """h R[d, rows]^T with h on Y's grid: its levels (h / s_y, integers) times R's, scaled by s_y * s_r."""
        levels = np.rint(h / np.float32(self.out_q[0].scale)).astype(np.float64)
        return (levels @ self.levels[1][d, rows].T).astype(np.float32) * self.r_scale[rows]

    def on_grid(self, h: np.ndarray) -> None:
        """Round the new hidden state to Y's int8 grid in place (the value the output and the next step hold)."""
        q = self.out_q[0]
        levels = np.clip(np.rint(h / np.float32(q.scale)) + q.zero_point, q.lo, q.hi) - q.zero_point
        np.multiply(levels, np.float32(q.scale), out=h, casting="unsafe")


@register("LSTM", DataType.INT8, quantized=True)
class LSTMInt8Kernel(Int8Recurrent, LSTMKernel):
    def add_recurrent(self, pre: np.ndarray, h: np.ndarray, r: np.ndarray, d: int) -> None:
        pre += self.hidden_product(h, d, slice(None))

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        super().step(pre, prev, cur, r, b, ins, d)
        self.on_grid(cur[:, :self.H])


@register("GRU", DataType.INT8, quantized=True)
class GRUInt8Kernel(Int8Recurrent, GRUKernel):
    def recurrent(self, h: np.ndarray, r: np.ndarray, d: int, rows: slice, out: np.ndarray) -> None:
        out[...] = self.hidden_product(h, d, rows)

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        super().step(pre, prev, cur, r, b, ins, d)
        self.on_grid(cur)
