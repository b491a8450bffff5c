"""The compiled siblings of the int8 LSTM and GRU (`lite/kernels/int8/recurrent.py`): each direction's steps as one
compiled call, with the numpy kernel's arithmetic. A step's h R^T sums h's integer levels (h / s_y: h is on Y's
grid) times R's integer levels in float32, exact while H * 127 * 127 < 2^24 (`fits`), scaled by s_y * s_r[row];
the gates are the float loop's; the new h is rounded to Y's grid before the next step reads it. The input
projection stays the numpy kernel's integer product before the loop."""
from __future__ import annotations

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels.compiled import Compiled
from lite.kernels.compiled.gru import GRUCompiled
from lite.kernels.compiled.llvm import njit
from lite.kernels.compiled.lstm import LSTMCompiled
from lite.kernels.int8.common import EXACT_F32
from lite.kernels.int8.recurrent import GRUInt8Kernel, LSTMInt8Kernel


@njit(nogil=True, cache=True)
def on_grid(h, scale, zero, lo, hi):  # pragma: no cover
    """h rounded to the int8 grid of (scale, zero) and clamped to [lo, hi], as a real value."""
    q = np.rint(h / scale) + zero
    return (min(max(q, lo), hi) - zero) * scale


@Compiled
def lstm_direction(pre, rt, r_scale, init, states, mask, reverse, scale, zero, lo, hi):  # pragma: no cover
    """pre [T, B, 4H] (i, o, f, c): x W^T + bias; rt [H, 4H]: R's levels transposed; r_scale [4H] = s_y * s_r;
    init [B, 2H] (h on Y's grid, c); states [T, B, 2H]; mask [T, B]; Y's grid (scale, zero, lo, hi)."""
    t_len, b_len, g4 = pre.shape
    n = g4 // 4
    half = np.float32(0.5)
    rec = np.empty(g4, np.float32)
    act = np.empty(g4, np.float32)
    for step in range(t_len):
        t = t_len - 1 - step if reverse else step
        before = t + 1 if reverse else t - 1
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            for j in range(g4):
                rec[j] = 0.0
            for k in range(n):
                level = np.rint(prev[k] / scale)
                for j in range(g4):
                    rec[j] += level * rt[k, j]
            for j in range(g4):
                p[j] += rec[j] * r_scale[j]
            for j in range(3 * n):
                act[j] = half * np.tanh(half * p[j]) + half
            for j in range(3 * n, g4):
                act[j] = np.tanh(p[j])
            cur = states[t, b]
            if mask[t, b]:
                for j in range(n):
                    c = act[2 * n + j] * prev[n + j] + act[j] * act[3 * n + j]
                    cur[n + j] = c
                    cur[j] = on_grid(act[n + j] * np.tanh(c), scale, zero, lo, hi)
            else:
                for j in range(2 * n):
                    cur[j] = prev[j]


@Compiled
def gru_direction(pre, rt, r_scale, rb_h, init, states, mask, reverse, linear_before_reset, scale, zero, lo,
                  hi):  # pragma: no cover
    """pre [T, B, 3H] (z, r, h); rt [H, 3H]: R's levels transposed; r_scale [3H] = s_y * s_r; rb_h [H]; init
    [B, H] on Y's grid; states [T, B, H]; mask [T, B]; Y's grid (scale, zero, lo, hi)."""
    t_len, b_len, g3 = pre.shape
    n = g3 // 3
    half = np.float32(0.5)
    rec = np.empty(g3, np.float32)
    act = np.empty(2 * n, np.float32)
    gated = np.empty(n, np.float32)
    for step in range(t_len):
        t = t_len - 1 - step if reverse else step
        before = t + 1 if reverse else t - 1
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            cols = g3 if linear_before_reset else 2 * n
            for j in range(cols):
                rec[j] = 0.0
            for k in range(n):
                level = np.rint(prev[k] / scale)
                for j in range(cols):
                    rec[j] += level * rt[k, j]
            for j in range(cols):
                rec[j] *= r_scale[j]
            for j in range(2 * n):
                p[j] += rec[j]
                act[j] = half * np.tanh(half * p[j]) + half
            if linear_before_reset:
                for j in range(n):
                    p[2 * n + j] += act[n + j] * (rec[2 * n + j] + rb_h[j])
            else:
                for j in range(n):
                    gated[j] = np.rint(act[n + j] * prev[j] / scale)
                for j in range(n):
                    rec[2 * n + j] = 0.0
                for k in range(n):
                    level = gated[k]
                    for j in range(n):
                        rec[2 * n + j] += level * rt[k, 2 * n + j]
                for j in range(n):
                    p[2 * n + j] += rec[2 * n + j] * r_scale[2 * n + j]
            cur = states[t, b]
            for j in range(n):
                cand = np.tanh(p[2 * n + j])
                cur[j] = on_grid((prev[j] - cand) * act[j] + cand, scale, zero, lo, hi) if mask[t, b] \
                    else prev[j]


class Int8Loop:
    """Y's grid as the compiled loops take it, and the exactness bound of their float32 level sums (a mixin
    before the float compiled sibling, whose buffers hold R's levels here)."""
    streams = False

    def grid(self) -> tuple:
        q = self.out_q[0]
        return np.float32(q.scale), np.float32(q.zero_point), np.float32(q.lo), np.float32(q.hi)

    def fits(self) -> bool:
        return self.H * 127 * 127 < EXACT_F32 and super().fits()


@register("LSTM", DataType.INT8, quantized=True, backend="compiled")
class LSTMInt8Compiled(Int8Loop, LSTMCompiled, LSTMInt8Kernel):
    def cell(self, d: int):
        return lstm_direction.bind(0, self.gates_buf[:, :, d], self.rt[d], self.r_scale, self.init[d],
                                   self.states_buf[:, :, d], self.live, np.bool_(self.reverse(d)), *self.grid())


@register("GRU", DataType.INT8, quantized=True, backend="compiled")
class GRUInt8Compiled(Int8Loop, GRUCompiled, GRUInt8Kernel):
    def cell(self, d: int):
        return gru_direction.bind(0, self.gates_buf[:, :, d], self.rt[d], self.r_scale, self.rb_h[d], self.init[d],
                                  self.states_buf[:, :, d], self.live, np.bool_(self.reverse(d)),
                                  np.bool_(self.attrs.linear_before_reset), *self.grid())
