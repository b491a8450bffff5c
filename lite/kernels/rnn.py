"""RNN (ONNX): h = f(x Wi + h_prev Ri + Wb_i + Rb_i), one activation f per direction."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentKernel
from lite.traits import TrainMode, declare

declare("RNN", train=TrainMode(outputs=("Y_h", "gates", "states")))


@register("RNN", DataType.FLOAT32)
class RNNKernel(RecurrentKernel):
    gates, states, functions = 1, 1, 1

    def step(self, pre, prev, cur, r, b, ins, d) -> None:
        np.matmul(prev, r.T, out=self.tmp)
        pre += self.tmp
        self.acts[d][0](pre, cur)
