"""The compiled Attention's softmax pass (lite/kernels/compiled/attention.py) against numpy's float64 softmax: a
key masked by a large negative bias (a padded token) gets exactly 0, as numpy's exp underflows, never a denormal
(slow in the pass and in the product with V)."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


def test_masked_keys_get_zero_and_the_rest_numpys_softmax():
    from lite.kernels.compiled import numba_module
    from lite.kernels.compiled.attention import softmax_scores
    numba_module()
    rng = np.random.default_rng(3)
    scores = rng.normal(0, 4, (2, 3, 5, 37)).astype(np.float32)
    bias = np.zeros((2, 1, 1, 37), np.float32)
    bias[0, ..., 20:] = -1e4                                   # sentence 0 padded after 20 tokens
    bias[1, ..., 30:] = -np.inf
    out = np.full_like(scores, np.nan)
    softmax_scores.bind(1, scores, np.float32(0.125), bias, out)()
    z = scores.astype(np.float64) * 0.125 + bias
    expected = np.exp(z - z.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    assert (out[0, ..., 20:] == 0).all() and (out[1, ..., 30:] == 0).all()
    np.testing.assert_allclose(out, expected, rtol=2e-6, atol=1e-7)
