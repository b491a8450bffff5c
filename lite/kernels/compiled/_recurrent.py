"""What the compiled siblings of GRU and LSTM share: with the default gates, each direction's loop is one compiled
call (`recurrent`) instead of the numpy steps."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.kernel import TensorSpec
from lite.kernels._recurrent_math import RecurrentKernel


class CompiledLoop(RecurrentKernel):
    """Binds one compiled call per direction (`cell`) when `fits`, over buffers it keeps: the initial states and
    the mask are refreshed from the inputs at every run, R^T (and what `refresh` copies) too when the weights may
    change between runs (a training graph's), else once when bound: a streaming model runs a step or a few per
    call, where copying R^T took most of the call (Silero VAD's 128-unit LSTM: 256 KB a step)."""

    def fits(self) -> bool:
        """Whether the op's compiled loop runs this node (the default gates, no option it leaves out)."""
        raise NotImplementedError

    def cell(self, d: int) -> Callable[[], None]:
        """Direction d's compiled loop, bound on the gates and states views and the buffers of `bind`."""
        raise NotImplementedError

    def refresh(self, d: int, b: np.ndarray | None) -> None:
        """Copy what else the compiled loop reads from this run's inputs (GRU: Rb_h)."""

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
            self.cells = [self.cell(d) for d in range(self.D)]
            if self.constant:
                b = inputs[3] if len(inputs) > 3 else None
                for d in range(self.D):
                    self.take_weights(d, inputs[2][d], b)

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
