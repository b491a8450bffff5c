"""The compiled Attention's fused pass (lite/kernels/compiled/attention.py) against a float64 numpy attention, on
the layouts it reads in place ([B, S, H * D] and [B, H, S, D]), grouped key/value heads, query counts that leave
a partial block of four rows, head sizes off the vector width, keys masked by a large negative bias (padded
tokens) or -inf, and a row whose every key is masked (y = 0)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


def heads_of(x: np.ndarray, heads: int) -> np.ndarray:
    b, s, hd = x.shape
    return x.reshape(b, s, heads, hd // heads).transpose(0, 2, 1, 3)


def reference(q4, k4, v4, scale, bias):
    """float64 attention over [B, H, S, D] heads; K/V heads repeated for grouped queries; masked rows give 0."""
    group = q4.shape[1] // k4.shape[1]
    k4, v4 = (np.repeat(t.astype(np.float64), group, axis=1) for t in (k4, v4))
    z = q4.astype(np.float64) @ k4.swapaxes(-1, -2) * scale + bias
    peak = z.max(-1, keepdims=True)
    e = np.exp(z - np.where(np.isneginf(peak), 0, peak))
    total = e.sum(-1, keepdims=True)
    return (e / np.where(total == 0, 1, total)) @ v4


def run(q, k, v, hq, hkv, bias, scale):
    from lite.kernels.compiled import numba_module
    from lite.kernels.compiled.attention import as_rows, attention_rows, rows_of
    numba_module()
    y = np.full(q.shape[:-1] + (v.shape[-1] * (hq // hkv) if q.ndim == 3 else v.shape[-1],), np.nan, np.float32)
    s, t = q.shape[1 if q.ndim == 3 else 2], k.shape[1 if k.ndim == 3 else 2]
    d = q.shape[-1] // hq if q.ndim == 3 else q.shape[-1]
    dv = v.shape[-1] // hkv if v.ndim == 3 else v.shape[-1]
    layout = np.array([rows_of(x, h, n) for x, h, n in ((q, hq, s), (k, hkv, t), (v, hkv, t), (y, hq, s))]
                      + [[q.shape[0], hq, s, t], [d, dv, 0, 0]], np.int64)
    args = [as_rows(q), as_rows(k), as_rows(v), layout, np.float32(scale), bias, np.int64(hq // hkv), as_rows(y)]
    attention_rows.bind(1, *args)()
    return y


@pytest.mark.parametrize("batch, hq, hkv, s, t, d", [(2, 6, 3, 7, 37, 5), (1, 4, 4, 9, 16, 32), (3, 2, 1, 4, 70, 17)])
def test_three_d_layout_with_grouped_heads_against_float64(batch, hq, hkv, s, t, d):
    rng = np.random.default_rng(batch * 100 + t)
    q = rng.normal(0, 1, (batch, s, hq * d)).astype(np.float32)
    k, v = (rng.normal(0, 1, (batch, t, hkv * d)).astype(np.float32) for _ in range(2))
    bias = np.zeros((batch, 1, 1, t), np.float32)
    bias[0, ..., t // 2:] = -1e4                               # sentence 0 padded after half its tokens
    y = run(q, k, v, hq, hkv, bias, d ** -0.5)
    expected = reference(heads_of(q, hq), heads_of(k, hkv), heads_of(v, hkv), d ** -0.5, bias)
    np.testing.assert_allclose(heads_of(y, hq), expected, rtol=1e-5, atol=2e-6)


def test_four_d_layout_masked_keys_and_fully_masked_rows():
    rng = np.random.default_rng(7)
    q, k, v = (rng.normal(0, 2, (2, 3, 6, 24)).astype(np.float32) for _ in range(3))
    bias = np.zeros((2, 3, 6, 6), np.float32)
    bias[1, :, :, 4:] = -np.inf
    bias[0, 2, 5] = -np.inf                                    # every key of one row masked
    y = run(q, k, v, 3, 3, bias, 0.3)
    assert (y[0, 2, 5] == 0).all()
    np.testing.assert_allclose(y, reference(q, k, v, 0.3, bias), rtol=1e-5, atol=2e-6)
