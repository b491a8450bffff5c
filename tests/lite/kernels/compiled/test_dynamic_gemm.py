"""The compiled dynamic GEMM (lite/kernels/compiled/dynamic_gemm.py) against an independent reference: each row
through onnx.reference's DynamicQuantizeLinear, the product in int64, scaled in float32; every row count of a
task's tail (whole tiles, then 4-, 2- and 1-row tiles), rows of every length, and its fused GELU against math.erf."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
RNG = np.random.default_rng(7)
K, N = 83, 45                   # K not a multiple of 4, N not of the tile width: padded groups, masked columns


def reference(x: np.ndarray, w: np.ndarray, col_scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """float32((q - z) @ w) * (s * s_w) + b per row, q, s, z from DynamicQuantizeLinear over that row."""
    quantize = ReferenceEvaluator(helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]))
    rows = []
    for row in x:
        q, s, z = quantize.run(None, {"x": row})
        acc = (q.astype(np.int64) - int(z)) @ w.astype(np.int64)
        rows.append(acc.astype(np.float32) * (np.float32(s) * col_scale) + bias)
    return np.array(rows, np.float32)


def run(x: np.ndarray, w: np.ndarray, col_scale: np.ndarray, bias: np.ndarray, gelu: bool = False) -> np.ndarray:
    from lite.kernels.compiled import dynamic_gemm, numba_module
    numba_module()
    out = np.full((len(x), w.shape[1]), np.nan, np.float32)
    rows_type, width = dynamic_gemm.quantized_rows(w)
    scratch = (np.zeros((len(x), width), rows_type), np.zeros(len(x), np.int32), np.zeros(len(x), np.float32))
    dynamic_gemm.bind(x, w, col_scale, bias, out, *scratch, None, gelu)()
    return out


def operands(rows: int, depth: int = K) -> tuple[np.ndarray, ...]:
    x = RNG.normal(0, 1, (rows, depth)).astype(np.float32)
    x[0] *= 30                                              # one loud row: its own range
    w = RNG.integers(-127, 128, (depth, N)).astype(np.int8)
    return x, w, RNG.uniform(1e-3, 1e-2, N).astype(np.float32), RNG.normal(0, 1, N).astype(np.float32)


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 32])
def test_every_tail_of_rows_gives_the_reference_bits(rows):
    x, w, col_scale, bias = operands(rows)
    np.testing.assert_array_equal(run(x, w, col_scale, bias), reference(x, w, col_scale, bias))


@pytest.mark.parametrize("depth", [1, 15, 32, 33, 64, 100])
def test_row_ranges_over_whole_vectors_and_tails(depth):
    """The rows' ranges run in vectors of 2 x 16 lanes (AVX-512; 2 x 8 elsewhere) and a scalar tail: a row whose
    extreme sits in the tail, one wholly positive (range from 0) and one wholly negative."""
    x, w, col_scale, bias = operands(4, depth)
    x[1, -1] = 50.0
    x[2] = np.abs(x[2])
    x[3] = -np.abs(x[3])
    np.testing.assert_array_equal(run(x, w, col_scale, bias), reference(x, w, col_scale, bias))


def test_the_fused_gelu_is_within_its_bound_of_the_exact_function():
    x, w, col_scale, bias = operands(11)
    x[1:] *= 8                                              # products out to |v| ~ 30: past the clamp
    product = reference(x, w, col_scale, bias).astype(np.float64)
    exact = product * (1 + np.vectorize(math.erf)(product / math.sqrt(2))) / 2
    out = run(x, w, col_scale, bias, gelu=True)
    assert np.abs(product).max() > 8 and (product < -6).any()
    assert (np.abs(out - exact) <= 2.5e-7 * np.maximum(1.0, np.abs(product))).all()


def test_gelu_over_a_sweep_and_its_special_values_match_the_numpy_kernels():
    from numba import njit

    from lite.kernels.activation import gelu
    from lite.kernels.compiled import numba_module
    from lite.kernels.compiled.dynamic_gemm import gelu_rational
    numba_module()

    @njit
    def apply(x, out):
        for i in range(len(x)):
            out[i] = gelu_rational(x[i])

    x = np.concatenate([np.linspace(-12, 12, 20_001), [np.nan, np.inf, -np.inf, 0.0, -0.0, -30.0, 5.656854]])
    x = x.astype(np.float32)
    out, reference = np.empty_like(x), np.empty_like(x)
    apply(x, out)
    with np.errstate(invalid="ignore"):
        gelu(x, reference)                                  # -inf * 0: NaN
    exact = np.array([v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in x[:20_001].astype(np.float64)])
    assert (np.abs(out[:20_001] - exact) <= 2.5e-7 * np.maximum(1.0, np.abs(x[:20_001]))).all()
    assert (out[:20_001][x[:20_001] < -6] <= 0).all()          # never the wrong sign far left
    np.testing.assert_array_equal(out[20_001:-1], reference[20_001:-1])
