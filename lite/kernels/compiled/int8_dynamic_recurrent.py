"""The compiled siblings of dynamically quantized LSTM and GRU: X W^T as one dynamic GEMM with X's single range
(`dynamic_gemm`, per tensor), then each direction's steps as one compiled call (`dynamic_recurrent`). Both run on
one thread, like the float loops: a threaded projection left the pool's workers spinning beside the serial steps
(LSTM hidden 256 at 2 threads: 42 ms against 1.7 ms on one)."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import A, RecurrentKernel
from lite.kernels.compiled._recurrent import CompiledLoop
from lite.kernels.int8.dynamic_recurrent import GRU_SCALES, SCALES, DynamicGRUKernel, DynamicLSTMKernel


class DynamicLoop(CompiledLoop):
    """Packs W and R once (`bind`), runs the projection and the loops on the packed weights. Subclasses say where
    the scales are (`scales`), which bias the projection adds (`projection_bias`) and which each step adds
    (`step_bias`)."""
    scales: range
    streams = False

    def projection_bias(self, b: np.ndarray | None) -> np.ndarray | None:
        return None

    def step_bias(self, b: np.ndarray | None, d: int) -> np.ndarray | None:
        return None

    def bind(self, inputs, outputs, scratch) -> None:
        from lite.kernels.compiled import dynamic_gemm
        w, r, b = inputs[1], inputs[2], inputs[3]
        w_scale, r_scale = (inputs[k].reshape(self.D, -1) for k in (self.scales[0], self.scales[2]))
        self.rows_type, width = dynamic_gemm.quantized_rows(w.reshape(-1, self.I).T)
        _, state_width = dynamic_gemm.quantized_rows(r[0].T)
        self.projection = (dynamic_gemm.packed(w.reshape(-1, self.I).T, self.rows_type),
                           dynamic_gemm.columns_of(w_scale.reshape(-1), self.projection_bias(b)))
        self.recurrence = [(dynamic_gemm.packed(r[d].T, self.rows_type),
                            dynamic_gemm.columns_of(r_scale[d], self.step_bias(b, d))) for d in range(self.D)]
        self.rows = np.zeros((self.T * self.B, width), self.rows_type)
        self.state_rows = np.zeros((self.B, state_width), self.rows_type)
        self.zero, self.row_scale = np.zeros(self.T * self.B, np.int32), np.zeros(self.T * self.B, np.float32)
        self.rec = np.zeros((self.B, self.gates * self.H), np.float32)
        super().bind(inputs[:self.scales.start], outputs, scratch)
        self.gemm = dynamic_gemm.dynamic_gemm
        x = self.time_major(inputs[0])
        self.full = self.gemm.bind(0, *self.projection_args(x)) \
            if self.compiled and x.flags.c_contiguous else None

    def project(self, x, w, bias) -> None:
        if not self.compiled:
            super().project(x, w, bias)
        elif self.full is not None:
            self.full()
        else:                                           # x is a transposed view (layout 1)
            args = self.projection_args(x)
            self.gemm.entry(0, *args)(*args)

    def projection_args(self, x: np.ndarray) -> tuple:
        """`dynamic_gemm`'s arguments for x (time-major) into the gates, X quantized with one range."""
        from lite.kernels.compiled import dynamic_gemm
        m = self.T * self.B
        (weight, sums), (scales, bias) = self.projection
        pre = self.gates_buf.reshape(self.T * self.B, -1)
        return (x.reshape(m, self.I), self.rows, self.zero, self.row_scale, weight, sums, scales, bias, pre,
                *dynamic_gemm.epilogue(), *dynamic_gemm.tasks(m, pre.shape[-1]), np.bool_(False))

    def loop(self, d, r, b, ins, init, mask) -> None:
        """The compiled loop reads the packed R of `bind`: only the initial states and the mask are refreshed."""
        if not self.compiled:
            super().loop(d, r, b, ins, init, mask)
            return
        np.copyto(self.init[d], init)
        self.live[:] = True if mask is None else mask
        self.cells[d]()

    def run(self, inputs, outputs) -> None:
        """Compiled: the loops and the projection read the packed weights of `bind`, so the numpy path's integer
        levels are not made."""
        if self.compiled:
            RecurrentKernel.run(self, inputs[:self.scales.start], outputs)
        else:
            super().run(inputs, outputs)

    def loop_args(self, d: int) -> tuple:
        """The arguments a direction's compiled loop shares: gates, packed R^T, its column sums and scales."""
        (weight, sums), (scales, bias) = self.recurrence[d]
        return self.gates_buf[:, :, d], weight, sums, scales, bias

    def buffers(self) -> tuple:
        return (self.init, self.states_buf, self.live, self.state_rows, self.zero[:self.B], self.row_scale[:self.B],
                self.rec)


@register("LSTM", DataType.FLOAT32, quantized=True, backend="compiled")
class DynamicLSTMCompiled(DynamicLoop, DynamicLSTMKernel):
    scales = SCALES

    def fits(self) -> bool:
        """Not with sequence_lens: the numpy kernel then walks onnxruntime's order (a reverse direction from each
        row's end, ended rows quantized as zeros), which this loop does not."""
        return self.default_gates(A.SIGMOID, A.TANH, A.TANH) and not (self.peepholes or self.attrs.input_forget
                                                                       or self.lengths)

    def bind(self, inputs, outputs, scratch) -> None:
        self.peepholes = len(inputs) > 7 and inputs[7] is not None
        self.lengths = len(inputs) > 4 and inputs[4] is not None
        super().bind(inputs, outputs, scratch)

    def step_bias(self, b, d):
        """onnxruntime adds the bias after the recurrent term."""
        folded = self.folded_bias(b)
        return None if folded is None else folded[d]

    def cell(self, d: int):
        from lite.kernels.compiled import dynamic_recurrent
        gates, weight, sums, scales, bias = self.loop_args(d)
        init, states, live, rows, zero, row_scale, rec = self.buffers()
        return dynamic_recurrent.lstm_direction.bind(0, gates, weight, sums, scales, bias, init[d], states[:, :, d],
                                                     live, np.bool_(self.reverse(d)), rows, zero, row_scale, rec)


@register("GRU", DataType.FLOAT32, quantized=True, backend="compiled")
class DynamicGRUCompiled(DynamicLoop, DynamicGRUKernel):
    scales = GRU_SCALES

    def fits(self) -> bool:
        return self.default_gates(A.SIGMOID, A.TANH) and bool(self.attrs.linear_before_reset)

    def bind(self, inputs, outputs, scratch) -> None:
        b = inputs[3]
        self.rb_h = np.zeros((self.D, self.H), np.float32) if b is None else b[:, 5 * self.H:].astype(np.float32)
        super().bind(inputs, outputs, scratch)

    def projection_bias(self, b):
        folded = self.folded_bias(b)
        return None if folded is None else folded.reshape(-1)

    def cell(self, d: int):
        from lite.kernels.compiled import dynamic_recurrent
        gates, weight, sums, scales, _ = self.loop_args(d)
        init, states, live, rows, zero, row_scale, rec = self.buffers()
        return dynamic_recurrent.gru_direction.bind(0, gates, weight, sums, scales, self.rb_h[d], init[d],
                                                    states[:, :, d], live, np.bool_(self.reverse(d)), rows, zero,
                                                    row_scale, rec)
