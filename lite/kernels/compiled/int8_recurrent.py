"""The compiled siblings of the int8 LSTM and GRU (`lite/kernels/int8/recurrent.py`): each direction's steps as
the float siblings' compiled loop (`recurrent`) on R's integer levels, with the numpy kernel's arithmetic: a
step's h R^T sums h's integer levels (h / s_y: h is on Y's grid) times R's levels in float32, exact while
H * 127 * 127 < 2^24 (`fits`), scaled by s_y * s_r[row]; the new h is rounded to Y's grid before the next step
reads it. The input projection stays the numpy kernel's integer product before the loop."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels.compiled.gru import GRUCompiled
from lite.kernels.compiled.lstm import LSTMCompiled
from lite.kernels.int8.common import EXACT_F32
from lite.kernels.int8.recurrent import GRUInt8Kernel, LSTMInt8Kernel


class Int8Loop:
    """Y's grid and R's scales as the compiled loops take them, and the exactness bound of their float32 level
    sums (a mixin before the float compiled sibling, whose buffers hold R's levels here)."""
    streams = False

    def grid(self) -> tuple:
        q = self.out_q[0]
        return np.bool_(True), np.float32(q.scale), np.float32(q.zero_point), np.float32(q.lo), np.float32(q.hi)

    def row_scales(self) -> np.ndarray:
        return self.r_scale

    def fits(self) -> bool:
        return self.H * 127 * 127 < EXACT_F32 and super().fits()


@register("LSTM", DataType.INT8, quantized=True, backend="compiled")
class LSTMInt8Compiled(Int8Loop, LSTMCompiled, LSTMInt8Kernel):
    pass


@register("GRU", DataType.INT8, quantized=True, backend="compiled")
class GRUInt8Compiled(Int8Loop, GRUCompiled, GRUInt8Kernel):
    pass
