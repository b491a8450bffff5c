"""RNNGrad: backpropagation through time of `lite/kernels/rnn.py`: dpre = dh * f'(pre), dh_prev = dpre R."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels._recurrent_math import RecurrentGradKernel
from lite.kernels.rnn import RNNKernel


@register("RNNGrad", DataType.FLOAT32)
class RNNGradKernel(RecurrentGradKernel, RNNKernel):
    def prepare_grad(self, pre, prev, r, b, d, ins) -> None:
        self.slope = self.acts[d][0].grad(pre)

    def step_grad(self, t, d, dnew, prev, r, ins) -> np.ndarray:
        dpre = self.dpre[t, :, d]
        np.multiply(dnew, self.slope[t], out=dpre)
        return dpre @ r
