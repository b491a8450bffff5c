"""The compiled time-step loops of a dynamically quantized LSTM or GRU direction (`int8/dynamic_recurrent.py`;
default gates; LSTM without peepholes or input_forget, GRU with linear_before_reset): at every step h_{t-1} of
the whole batch is quantized to uint8 with one range (DynamicQuantizeLSTM's rule), multiplied by the int8 R in the
register tiles of `dynamic_gemm` (VNNI quads where the host has them), scaled, and the gates follow in the float
steps of `recurrent`'s loops. The float results equal the numpy kernels': the same float32 operations in the same
order."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.dynamic_gemm import LEVELS, _row, _row_part
from lite.kernels.compiled.int8 import NR
from lite.kernels.compiled.llvm import njit
from lite.kernels.compiled.recurrent import gru_cell, gru_gates, gru_reset_after, lstm_cell, times


@njit(nogil=True, cache=True)
def quantized_product(init, states, step, before, n, weight, col_sum, col_scale, no_bias, xs, zero, row_scale,
                      rec):  # pragma: no cover
    """rec [B, G*H] = the previous step's h (its first n columns, init at step 0) of every batch row, quantized to
    uint8 with one range, times R^T (`weight`, packed) in the VNNI tiles, scaled by its scale and `col_scale`."""
    b_len, columns = rec.shape
    blocks, groups, width = weight.shape
    low, high = np.float32(0.0), np.float32(0.0)
    for b in range(b_len):
        prev = init[b] if step == 0 else states[before, b]
        for k in range(n):
            low = min(low, prev[k])
            high = max(high, prev[k])
    scale = (high - low) / np.float32(LEVELS) if high != low else np.float32(1.0)
    z = np.rint(min(np.float32(0.0) - low / scale, np.float32(LEVELS)))
    for b in range(b_len):
        prev = init[b] if step == 0 else states[before, b]
        for k in range(n):
            q = np.rint(prev[k] / scale) + z
            xs[b, k] = np.int32(min(max(q, np.float32(0.0)), np.float32(LEVELS)))
        for k in range(n, xs.shape[1]):
            xs[b, k] = 0
        zero[b] = np.int32(z)
        row_scale[b] = scale
        for blk in range(blocks):
            n0 = blk * NR
            valid = min(NR, columns - n0)
            if valid == NR:
                _row(xs, b, weight, blk, groups, zero, row_scale, col_sum, col_scale, no_bias, n0, rec, valid)
            else:
                _row_part(xs, b, weight, blk, groups, zero, row_scale, col_sum, col_scale, no_bias, n0, rec, valid)


@Compiled
def lstm_direction(pre, weight, col_sum, col_scale, bias, init, states, mask, reverse, xs, zero, row_scale,
                   rec):  # pragma: no cover
    """pre [T, B, 4H] (gates i, o, f, c): the quantized x W^T; weight, col_sum: R^T [H, 4H] packed
    (`dynamic_gemm.packed`); col_scale, bias: R's scales and the folded bias [4H] (padded); init [B, 2H];
    states [T, B, 2H] gets h and c of every step; mask [T, B]; xs [B, >= H], zero, row_scale [B], rec [B, 4H]:
    work."""
    t_len, b_len, g4 = pre.shape
    no_bias = np.zeros_like(bias)
    one, none = np.float32(1.0), np.float32(0.0)
    for step in range(t_len):
        t, before = times(step, t_len, reverse)
        quantized_product(init, states, step, before, g4 // 4, weight, col_sum, col_scale, no_bias, xs, zero,
                          row_scale, rec)
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            for j in range(g4):
                p[j] += rec[b, j]
                p[j] += bias[j]
            lstm_cell(p, prev, states[t, b], mask[t, b], False, one, none, none, none)


@Compiled
def gru_direction(pre, weight, col_sum, col_scale, rb_h, init, states, mask, reverse, xs, zero, row_scale,
                  rec):  # pragma: no cover
    """GRU with linear_before_reset: pre [T, B, 3H] (gates z, r, h): the quantized x W^T + the folded bias;
    weight, col_sum, col_scale: R^T [H, 3H] as for the LSTM; rb_h [H]: Rb_h (inside r * (...)); init [B, H];
    states [T, B, H]; the rest as for the LSTM."""
    t_len, b_len, g3 = pre.shape
    n = g3 // 3
    no_bias = np.zeros(col_scale.shape, np.float32)
    act = np.empty(2 * n, np.float32)       # z, r
    one, none = np.float32(1.0), np.float32(0.0)
    for step in range(t_len):
        t, before = times(step, t_len, reverse)
        quantized_product(init, states, step, before, n, weight, col_sum, col_scale, no_bias, xs, zero, row_scale,
                          rec)
        for b in range(b_len):
            prev = init[b] if step == 0 else states[before, b]
            p = pre[t, b]
            gru_gates(p, rec[b], act)
            gru_reset_after(p, act, rec[b], rb_h)
            gru_cell(p, act, prev, states[t, b], mask[t, b], False, one, none, none, none)
