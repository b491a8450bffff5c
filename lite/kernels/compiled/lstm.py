"""The compiled sibling of LSTM: each direction's loop of the default gates (sigmoid, tanh, tanh; no peepholes,
no input_forget, float weights) as one compiled call (`recurrent.lstm_direction`)."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import A
from lite.kernels.compiled._recurrent import CompiledLoop
from lite.kernels.lstm import LSTMKernel


@register("LSTM", DataType.FLOAT32, backend="compiled")
class LSTMCompiled(CompiledLoop, LSTMKernel):
    def bind(self, inputs, outputs, scratch) -> None:
        self.peepholes = len(inputs) > 7 and inputs[7] is not None
        super().bind(inputs, outputs, scratch)

    def fits(self) -> bool:
        return self.default_gates(A.SIGMOID, A.TANH, A.TANH) and not (self.peepholes or self.attrs.input_forget or
                                                                      self.quantized)

    def cell(self, d: int):
        from lite.kernels.compiled import recurrent
        return recurrent.lstm_direction.bind(0, self.gates_buf[:, :, d], self.rt[d], self.r_scale_loop, self.init[d],
                                             self.states_buf[:, :, d], self.live, np.bool_(self.reverse(d)),
                                             *self.grid())
