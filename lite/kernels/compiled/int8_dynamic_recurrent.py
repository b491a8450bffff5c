"""The compiled sibling of dynamically quantized LSTM: X W^T as one dynamic GEMM with X's single range
(`dynamic_gemm`, per tensor), then each direction's steps as one compiled call (`dynamic_recurrent`)."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import A, RecurrentKernel
from lite.kernels.compiled._recurrent import CompiledLoop
from lite.kernels.int8.dynamic_recurrent import DynamicLSTMKernel


@register("LSTM", DataType.FLOAT32, quantized=True, backend="compiled")
class DynamicLSTMCompiled(CompiledLoop, DynamicLSTMKernel):
    def fits(self) -> bool:
        return self.default_gates(A.SIGMOID, A.TANH, A.TANH) and not (self.peepholes or self.attrs.input_forget)

    def bind(self, inputs, outputs, scratch) -> None:
        from lite.kernels.compiled import dynamic_gemm
        self.peepholes = len(inputs) > 7 and inputs[7] is not None
        w, r, b = inputs[1], inputs[2], inputs[3]
        self.rows_type, width = dynamic_gemm.quantized_rows(w.reshape(-1, self.I).T)
        _, state_width = dynamic_gemm.quantized_rows(r[0].T)
        g = self.gates * self.H
        folded = self.folded_bias(b)
        self.projection = (dynamic_gemm.packed(w.reshape(-1, self.I).T, self.rows_type),
                           dynamic_gemm.columns_of(inputs[8].reshape(-1), None))
        self.recurrence = [(dynamic_gemm.packed(r[d].T, self.rows_type),
                            dynamic_gemm.columns_of(inputs[10].reshape(self.D, -1)[d],
                                                    None if folded is None else folded[d])) for d in range(self.D)]
        self.rows = np.zeros((self.T * self.B, width), self.rows_type)
        self.state_rows = np.zeros((self.B, state_width), self.rows_type)
        self.zero, self.row_scale = np.zeros(self.T * self.B, np.int32), np.zeros(self.T * self.B, np.float32)
        self.rec = np.zeros((self.B, g), np.float32)
        super().bind(inputs, outputs, scratch)
        self.gemm = dynamic_gemm.dynamic_gemm
        x = self.time_major(inputs[0])
        self.full = self.gemm.bind(x.size * g * self.D // 4, *self.projection_args(x, self.T)) \
            if self.compiled and x.flags.c_contiguous else None

    def project(self, x, w, bias) -> None:
        if not self.compiled:
            super().project(x, w, bias)
            return
        steps = self.T if self.lens is None else int(self.lens.max(initial=0))
        if steps == self.T and self.full is not None:
            self.full()
            return
        self.gates_buf[steps:] = 0
        args = self.projection_args(x, steps)
        self.gemm.entry(len(args[0]) * self.I * self.gates_buf[0].size // 4, *args)(*args)

    def projection_args(self, x: np.ndarray, steps: int) -> tuple:
        """`dynamic_gemm`'s arguments for the first `steps` steps of x (time-major), X quantized with one range."""
        from lite.kernels.compiled import dynamic_gemm
        m = steps * self.B
        (weight, sums), (scales, zeros) = self.projection
        pre = self.gates_buf.reshape(self.T * self.B, -1)
        return (x[:steps].reshape(m, self.I), self.rows[:m], self.zero[:m], self.row_scale[:m], weight, sums, scales,
                zeros, pre[:m], *dynamic_gemm.tasks(m, pre.shape[-1]), np.bool_(False))

    def loop(self, d, r, b, ins, init, mask) -> None:
        """The compiled loop reads the packed R of `bind`: only the initial states and the mask are refreshed."""
        if not self.compiled:
            super().loop(d, r, b, ins, init, mask)
            return
        np.copyto(self.init[d], init)
        self.live[:] = True if mask is None else mask
        self.cells[d]()

    def run(self, inputs, outputs) -> None:
        """Compiled: the recurrent loop and the projection above read the packed weights of `bind`, so the
        numpy path's integer levels are not made."""
        if self.compiled:
            RecurrentKernel.run(self, inputs[:8], outputs)
        else:
            super().run(inputs, outputs)

    def cell(self, d: int):
        from lite.kernels.compiled import dynamic_recurrent
        (weight, sums), (scales, bias) = self.recurrence[d]
        return dynamic_recurrent.lstm_direction.bind(0, self.gates_buf[:, :, d], weight, sums, scales, bias,
                                                     self.init[d], self.states_buf[:, :, d], self.live,
                                                     np.bool_(self.reverse(d)), self.state_rows,
                                                     self.zero[:self.B], self.row_scale[:self.B], self.rec)
