"""Compiled time-step loops of a GRU or LSTM direction with the default gates (sigmoid, tanh, no clip; LSTM
without peepholes or input_forget).

The numpy kernels spend a dozen numpy calls a step (~50 us at batch 1, against a cell of 64 hidden units that
is ~12 k multiply-adds); here one call runs every step of a direction. The input projection stays the one
BLAS matmul before the loop; a step computes h_{t-1} R^T as rows of R^T (`rt`, [H, G*H]) scaled by each
h_{t-1}[k] and summed, so the inner loop runs along contiguous gate columns and vectorises. The pre-activations
get the recurrent term added in place exactly as in the numpy step, so a training forward saves the same
`gates` for the gradient. Steps are serial (each needs the last), batch rows within a step too: at the sizes of
on-device recurrent models a second thread costs more than the step.
"""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled


@Compiled
def gru_direction(pre, rt, rb_h, init, states, mask, reverse, linear_before_reset):  # pragma: no cover
    """pre [T, B, 3H]: x W^T + the folded bias, in time order; rt [H, 3H] = R^T; rb_h [H]: Rb_h (added inside
    r * (...) when linear_before_reset); init [B, H]; states [T, B, H] gets h of every step; mask [T, B]: False
    where a step lies past its sequence's length (the state is kept)."""
    t_len, b_len, g3 = pre.shape
    n = g3 // 3
    half = np.float32(0.5)
    rec = np.empty(g3, np.float32)
    act = np.empty(2 * n, np.float32)       # z, r
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
                h = prev[k]
                for j in range(cols):
                    rec[j] += h * rt[k, j]
            for j in range(2 * n):
                p[j] += rec[j]
                act[j] = half * np.tanh(half * p[j]) + half     # sigmoid, as the numpy kernel writes it
            if linear_before_reset:
                for j in range(n):
                    p[2 * n + j] += act[n + j] * (rec[2 * n + j] + rb_h[j])
            else:
                for j in range(n):
                    gated[j] = act[n + j] * prev[j]
                for j in range(n):
                    rec[2 * n + j] = 0.0
                for k in range(n):
                    h = gated[k]
                    for j in range(n):
                        rec[2 * n + j] += h * rt[k, 2 * n + j]
                for j in range(n):
                    p[2 * n + j] += rec[2 * n + j]
            cur = states[t, b]
            for j in range(n):
                cand = np.tanh(p[2 * n + j])
                cur[j] = (prev[j] - cand) * act[j] + cand if mask[t, b] else prev[j]


@Compiled
def lstm_direction(pre, rt, init, states, mask, reverse):  # pragma: no cover
    """pre [T, B, 4H] (gates i, o, f, c): x W^T + the folded bias; rt [H, 4H] = R^T; init [B, 2H] (h, c);
    states [T, B, 2H] gets h and c of every step; mask as for the GRU."""
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
                h = prev[k]
                for j in range(g4):
                    rec[j] += h * rt[k, j]
            for j in range(g4):
                p[j] += rec[j]
            for j in range(3 * n):
                act[j] = half * np.tanh(half * p[j]) + half
            for j in range(3 * n, g4):
                act[j] = np.tanh(p[j])
            cur = states[t, b]
            if mask[t, b]:
                for j in range(n):
                    c = act[2 * n + j] * prev[n + j] + act[j] * act[3 * n + j]
                    cur[n + j] = c
                    cur[j] = act[n + j] * np.tanh(c)
            else:
                for j in range(2 * n):
                    cur[j] = prev[j]
