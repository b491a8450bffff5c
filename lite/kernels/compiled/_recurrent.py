"""What the compiled siblings of GRU and LSTM share: with the default gates, each direction's loop is one compiled
call (`recurrent`) instead of the numpy steps."""
from __future__ import annotations

from typing import Callable

import numpy as np

from lite.kernels._recurrent_math import RecurrentKernel


class CompiledLoop(RecurrentKernel):
    """Binds one compiled call per direction (`cell`) when `fits`, over buffers it keeps: R^T, the initial
    states and the mask are refreshed from the inputs at every run (weights change between training steps)."""

    def fits(self) -> bool:
        """Whether the op's compiled loop runs this node (the default gates, no option it leaves out)."""
        raise NotImplementedError

    def cell(self, d: int) -> Callable[[], None]:
        """Direction d's compiled loop, bound on the gates and states views and the buffers of `bind`."""
        raise NotImplementedError

    def refresh(self, d: int, b: np.ndarray | None) -> None:
        """Copy what else the compiled loop reads from this run's inputs (GRU: Rb_h)."""

    def bind(self, inputs, outputs, scratch) -> None:
        super().bind(inputs, outputs, scratch)
        self.compiled = self.fits()
        if self.compiled:
            f32 = np.float32
            self.rt = np.zeros((self.D, self.H, self.gates * self.H), f32)
            self.init = np.zeros((self.D, self.B, self.states * self.H), f32)
            self.live = np.ones((self.T, self.B), np.bool_)
            self.cells = [self.cell(d) for d in range(self.D)]

    def loop(self, d: int, r: np.ndarray, b: np.ndarray | None, ins: list, init: np.ndarray,
             mask: np.ndarray | None) -> None:
        if not self.compiled:
            super().loop(d, r, b, ins, init, mask)
            return
        np.copyto(self.rt[d], r.T)
        np.copyto(self.init[d], init)
        self.live[:] = True if mask is None else mask
        self.refresh(d, b)
        self.cells[d]()
