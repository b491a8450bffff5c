"""The compiled sibling of GRU: each direction's loop of the default gates (sigmoid, tanh) as one compiled call
(`recurrent.gru_direction`), either `linear_before_reset`."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import A
from lite.kernels.compiled._recurrent import CompiledLoop
from lite.kernels.gru import GRUKernel


@register("GRU", DataType.FLOAT32, backend="compiled")
class GRUCompiled(CompiledLoop, GRUKernel):
    def fits(self) -> bool:
        return self.default_gates(A.SIGMOID, A.TANH)

    def bind(self, inputs, outputs, scratch) -> None:
        self.rb_h = np.zeros((self.D, self.H), np.float32)
        super().bind(inputs, outputs, scratch)

    def cell(self, d: int):
        from lite.kernels.compiled import recurrent
        return recurrent.gru_direction.bind(0, self.gates_buf[:, :, d], self.rt[d], self.r_scale_loop, self.rb_h[d],
                                            self.init[d], self.states_buf[:, :, d], self.live,
                                            np.bool_(self.reverse(d)), np.bool_(self.attrs.linear_before_reset),
                                            *self.grid())

    def refresh(self, d: int, b: np.ndarray | None) -> None:
        self.rb_h[d] = b[d, 5 * self.H:] if b is not None and self.attrs.linear_before_reset else 0

