"""Compiled time-step loops of a GRU or LSTM direction with the default gates (sigmoid, tanh, no clip; LSTM
without peepholes or input_forget), in float32 or on int8 weights, and the gate arithmetic every compiled loop
shares (`times`, `lstm_cell`, `gru_gates`, `gru_reset_after`, `gru_cell`; the dynamically quantized loops of
`dynamic_recurrent` too).

The numpy kernels spend a dozen numpy calls a step (~50 us at batch 1, against a cell of 64 hidden units that
is ~12 k multiply-adds); here one call runs every step of a direction. The input projection stays the one
BLAS matmul before the loop; a step computes h_{t-1} R^T as rows of R^T (`rt`, [H, G*H]) scaled by each
h_{t-1}[k] and summed, so the inner loop runs along contiguous gate columns and vectorises. The pre-activations
get the recurrent term added in place exactly as in the numpy step, so a training forward saves the same
`gates` for the gradient. Steps are serial (each needs the last), batch rows within a step too: at the sizes of
on-device recurrent models a second thread costs more than the step.

On int8 weights (`int8_recurrent`, `quantized`) the loops run the int8 numpy kernels' arithmetic: h_{t-1} is on
Y's grid, so its integer levels (h / s_y) times R's levels (`rt`) sum exactly in float32, scaled by
r_scale = s_y * s_r[row]; the new h is rounded to Y's grid (`on_grid`) before the next step reads it. Float loops
pass r_scale = 1 (exact) and no grid.
"""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import njit

HALF = np.float32(0.5)


@njit(nogil=True, cache=True)
def sigmoid(v):  # pragma: no cover
    """As the numpy kernels write it: no overflow in exp for large |v|."""
    return HALF * np.tanh(HALF * v) + HALF


@njit(nogil=True, cache=True)
def level(h, quantized, scale):  # pragma: no cover
    """What a product multiplies for h: its integer level on the grid of `scale` when quantized, else h."""
    return np.rint(h / scale) if quantized else h


@njit(nogil=True, cache=True)
def on_grid(h, quantized, scale, zero, lo, hi):  # pragma: no cover
    """h rounded to the int8 grid of (scale, zero) and clamped to [lo, hi], as a real value, when quantized."""
    if not quantized:
        return h
    q = np.rint(h / scale) + zero
    return (min(max(q, lo), hi) - zero) * scale


@njit(nogil=True, cache=True)
def times(step, t_len, reverse):  # pragma: no cover
    """(the time of a direction's `step`, the time of the step before it)."""
    t = t_len - 1 - step if reverse else step
    return t, (t + 1 if reverse else t - 1)


@njit(nogil=True, cache=True)
def recurrent_product(prev, rt, cols, rec, quantized, scale):  # pragma: no cover
    """rec[:cols] = level(prev) R^T[:, :cols]: rows of R^T scaled by each level, summed (r_scale not applied)."""
    for j in range(cols):
        rec[j] = 0.0
    for k in range(rt.shape[0]):
        h = level(prev[k], quantized, scale)
        for j in range(cols):
            rec[j] += h * rt[k, j]


@njit(nogil=True, cache=True)
def lstm_cell(p, prev, cur, live, quantized, scale, zero, lo, hi):  # pragma: no cover
    """cur = (h, c) [2H] from the pre-activations p [4H] (gates i, o, f, c) and prev = (h, c); prev again where
    the step is not `live`; h on the grid when quantized."""
    n = cur.shape[0] // 2
    if live:
        for j in range(n):
            c = sigmoid(p[2 * n + j]) * prev[n + j] + sigmoid(p[j]) * np.tanh(p[3 * n + j])
            cur[n + j] = c
            cur[j] = on_grid(sigmoid(p[n + j]) * np.tanh(c), quantized, scale, zero, lo, hi)
    else:
        for j in range(2 * n):
            cur[j] = prev[j]


@njit(nogil=True, cache=True)
def gru_gates(p, rec, act):  # pragma: no cover
    """z and r [2H] into act, from p [3H] (gates z, r, h) with the recurrent term rec added to its first 2H."""
    for j in range(act.shape[0]):
        p[j] += rec[j]
        act[j] = sigmoid(p[j])


@njit(nogil=True, cache=True)
def gru_reset_after(p, act, rec, rb_h):  # pragma: no cover
    """linear_before_reset: the candidate pre-activation p_h += r * (h R_h^T + Rb_h)."""
    n = rb_h.shape[0]
    for j in range(n):
        p[2 * n + j] += act[n + j] * (rec[2 * n + j] + rb_h[j])


@njit(nogil=True, cache=True)
def gru_cell(p, act, prev, cur, live, quantized, scale, zero, lo, hi):  # pragma: no cover
    """cur [H] = (1 - z) * tanh(p_h) + z * prev, from p's candidate pre-activation and act's z; prev again where
    the step is not `live`; on the grid when quantized."""
    n = cur.shape[0]
    if live:
        for j in range(n):
            cand = np.tanh(p[2 * n + j])
            cur[j] = on_grid((prev[j] - cand) * act[j] + cand, quantized, scale, zero, lo, hi)
    else:
        for j in range(n):
            cur[j] = prev[j]


@Compiled
def gru_direction(pre, rt, r_scale, rb_h, init, states, mask, reverse, linear_before_reset, quantized, scale, zero,
                  lo, hi):  # pragma: no cover
    """pre [T, B, 3H]: x W^T + the folded bias, in time order; rt [H, 3H] = R^T (R's levels when quantized);
    r_scale [3H]; rb_h [H]: Rb_h (added inside r * (...) when linear_before_reset); init [B, H]; states [T, B, H]
    gets h of every step; mask [T, B]: False where a step lies past its sequence's length (the state is kept);
    Y's grid (scale, zero, lo, hi) when quantized."""
    t_len, b_len, g3 = pre.shape
    n = g3 // 3
    rec = np.empty(g3, np.float32)
    act = np.empty(2 * n, np.float32)       # z, r
    gated = np.empty(n, np.float32)
    for step in range(t_len):
        t, before = times(step, t_len, reverse)
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            cols = g3 if linear_before_reset else 2 * n
            recurrent_product(prev, rt, cols, rec, quantized, scale)
            if quantized:
                for j in range(cols):
                    rec[j] *= r_scale[j]
            gru_gates(p, rec, act)
            if linear_before_reset:
                gru_reset_after(p, act, rec, rb_h)
            else:
                for j in range(n):
                    gated[j] = level(act[n + j] * prev[j], quantized, scale)
                for j in range(n):
                    rec[2 * n + j] = 0.0
                for k in range(n):
                    h = gated[k]
                    for j in range(n):
                        rec[2 * n + j] += h * rt[k, 2 * n + j]
                for j in range(n):
                    p[2 * n + j] += rec[2 * n + j] * r_scale[2 * n + j]
            gru_cell(p, act, prev, states[t, b], mask[t, b], quantized, scale, zero, lo, hi)


@Compiled
def lstm_direction(pre, rt, r_scale, init, states, mask, reverse, quantized, scale, zero, lo, hi):  # pragma: no cover
    """pre [T, B, 4H] (gates i, o, f, c): x W^T + the folded bias; rt [H, 4H] = R^T (R's levels when quantized);
    r_scale [4H]; init [B, 2H] (h, c); states [T, B, 2H] gets h and c of every step; mask and the grid as for the
    GRU."""
    t_len, b_len, g4 = pre.shape
    rec = np.empty(g4, np.float32)
    for step in range(t_len):
        t, before = times(step, t_len, reverse)
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            recurrent_product(prev, rt, g4, rec, quantized, scale)
            for j in range(g4):
                p[j] += rec[j] * r_scale[j]
            lstm_cell(p, prev, states[t, b], mask[t, b], quantized, scale, zero, lo, hi)
