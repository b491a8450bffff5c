"""What the compiled siblings of GRU and LSTM share: with the default gates, each direction's loop is one compiled
call (`recurrent`) instead of the numpy steps; with weights stored in the model and no sequence_lens, a run is a
few prebound numpy calls around it (`Streaming`)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.kernel import TensorSpec
from lite.kernels._recurrent_math import RecurrentKernel
from lite.threads import serial_blas


class CompiledLoop(RecurrentKernel):
    """Binds one compiled call per direction (`cell`) when `fits`, over buffers it keeps: the initial states and
    the mask are refreshed from the inputs at every run, R^T (and what `refresh` copies) too when the weights may
    change between runs (a training graph's), else once when bound: a streaming model runs a step or a few per
    call, where copying R^T took most of the call (Silero VAD's 128-unit LSTM: 256 KB a step)."""

    streams = True      # whether `Streaming` may run the node (not the quantized loops: their runs wrap this one's)

    def fits(self) -> bool:
        """Whether the op's compiled loop runs this node (the default gates, no option it leaves out)."""
        raise NotImplementedError

    def cell(self, d: int) -> Callable[[], None]:
        """Direction d's compiled loop, bound on the gates and states views and the buffers of `bind`."""
        raise NotImplementedError

    def refresh(self, d: int, b: np.ndarray | None) -> None:
        """Copy what else the compiled loop reads from this run's inputs (GRU: Rb_h)."""

    def grid(self) -> tuple:
        """(quantized, scale, zero, lo, hi): the int8 grid the loop rounds h to; none for float weights."""
        f32 = np.float32
        return np.bool_(False), f32(1), f32(0), f32(-np.inf), f32(np.inf)

    def row_scales(self) -> np.ndarray:
        """[G*H]: what the loop scales the recurrent term by, per gate column (1 for float weights)."""
        return np.ones(self.gates * self.H, np.float32)

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        super().select(inputs)
        self.constant = all(s is None or s.value is not None for s in inputs[2:4])   # R and B stored in the model

    def bind(self, inputs, outputs, scratch) -> None:
        super().bind(inputs, outputs, scratch)
        self.compiled = self.fits()
        if self.compiled:
            f32 = np.float32
            self.rt = np.zeros((self.D, self.H, self.gates * self.H), f32)
            self.init = np.zeros((self.D, self.B, self.states * self.H), f32)
            self.live = np.ones((self.T, self.B), np.bool_)
            self.r_scale_loop = self.row_scales()
            self.cells = [self.cell(d) for d in range(self.D)]
            if self.constant:
                b = inputs[3] if len(inputs) > 3 else None
                for d in range(self.D):
                    self.take_weights(d, inputs[2][d], b)
        lens = inputs[4] if len(inputs) > 4 else None
        fast = self.streams and self.compiled and self.constant and lens is None
        self.streaming = Streaming(self, inputs, outputs) if fast else None

    def run(self, inputs, outputs) -> None:
        if self.streaming is None:
            super().run(inputs, outputs)
        else:
            self.streaming()

    def take_weights(self, d: int, r: np.ndarray, b: np.ndarray | None) -> None:
        """Direction d's R^T, and what else `refresh` copies, into the compiled loop's buffers."""
        np.copyto(self.rt[d], r.T)
        self.refresh(d, b)

    def loop(self, d: int, r: np.ndarray, b: np.ndarray | None, ins: list, init: np.ndarray,
             mask: np.ndarray | None) -> None:
        if not self.compiled:
            super().loop(d, r, b, ins, init, mask)
            return
        if not self.constant:
            self.take_weights(d, r, b)
        np.copyto(self.init[d], init)
        self.live[:] = True if mask is None else mask
        self.cells[d]()


class Streaming:
    """A run of a compiled loop whose weights are stored in the model and whose sequences are full length, bound
    once on the node's arrays: the input projection into `gates` with the bias folded at bind time, the initial
    states copied into the loop's buffer, the loops, and Y, Y_h (Y_c) copied out. The same numpy calls as the
    generic run, without its per-run views, allocations and branches: a streaming model runs a step or a few per
    call, where those took most of it (Silero VAD's 128-unit LSTM: 28 -> 16 us of CPU a step)."""

    def __init__(self, kernel: CompiledLoop, inputs, outputs):
        k, h = kernel, kernel.H
        x = k.time_major(inputs[0])
        pre = k.gates_buf.reshape(k.T, k.B, -1)
        self.wt = inputs[1].reshape(-1, k.I).T
        self.x, self.pre = (x.reshape(-1, k.I), pre.reshape(k.T * k.B, -1)) if x.flags.c_contiguous else (x, pre)
        b = inputs[3] if len(inputs) > 3 else None
        bias = k.folded_bias(b)
        self.bias = None if bias is None else bias[None, None]
        self.gates, self.macs = k.gates_buf, pre.size * k.I
        self.initial = [(k.init[:, :, s * h:(s + 1) * h], k.direction_major(state))
                        for s, state in enumerate(inputs[5:5 + k.states]) if state is not None]
        k.live[:] = True
        self.cells = k.cells
        states = k.states_buf
        y = outputs[0].transpose((0, 2, 1, 3) if k.attrs.layout == 0 else (1, 0, 2, 3))      # [T, B, D, H]
        self.final = [(y, states[..., :h])] + [
            (k.direction_major(out)[d], states[k.last(d), :, d, s * h:(s + 1) * h])
            for s, out in enumerate(outputs[1:1 + k.states]) for d in range(k.D)]

    def __call__(self) -> None:
        with serial_blas(self.macs):
            np.matmul(self.x, self.wt, out=self.pre)
        if self.bias is not None:
            self.gates += self.bias
        for target, state in self.initial:
            np.copyto(target, state)
        for cell in self.cells:
            cell()
        for target, source in self.final:
            np.copyto(target, source)
