"""The vector row sum and max (lite/kernels/compiled/vector_reduce.py) against float64 and numpy: every length
around the vector boundaries (the folded lanes and the scalar tail), NaNs passed over by the max, empty rows."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


@pytest.fixture(scope="module")
def folds():
    from lite.kernels.compiled import numba_module
    numba = numba_module()
    from lite.kernels.compiled.vector_reduce import row_max, row_sum

    @numba.njit
    def both(row):
        return row_sum(row), row_max(row)
    return both


def test_sum_and_max_of_every_length_around_the_vectors(folds):
    from lite.kernels.compiled.llvm import LANES
    rng = np.random.default_rng(5)
    for n in range(4 * LANES + 3):
        row = rng.normal(0, 3, n).astype(np.float32)
        total, peak = folds(row)
        assert abs(total - row.astype(np.float64).sum()) <= 1e-6 * max(1, np.abs(row).sum()), n
        assert peak == (row.max() if n else -np.inf), n


def test_max_passes_over_nans_and_keeps_infinities(folds):
    from lite.kernels.compiled.llvm import LANES
    row = np.full(2 * LANES + 1, -np.inf, np.float32)
    assert folds(row) == (-np.inf, -np.inf)
    row[3] = np.nan
    row[-1] = 7.0                                              # in the scalar tail
    assert folds(row)[1] == 7.0
    row[LANES + 2] = np.inf
    assert folds(row)[1] == np.inf
    assert np.isnan(folds(row)[0])


def test_rows_times_on_strided_views_against_float64():
    """x @ m for 1-4 rows, column counts around one and two vectors (and the one-column path), views whose rows
    are strided (heads of a [B, S, H * D] tensor) and a matrix whose columns are strided (no vector path)."""
    from lite.kernels.compiled import numba_module
    from lite.kernels.compiled.llvm import LANES
    numba = numba_module()
    from lite.kernels.compiled.vector_reduce import rows_times
    product = numba.njit(lambda x, m, out: rows_times(x, m, out))
    rng = np.random.default_rng(11)
    for rows in range(1, 5):
        for columns in (1, LANES - 1, LANES, LANES + 3, 2 * LANES, 3 * LANES + 1):
            x = rng.normal(size=(rows, 3, 9)).astype(np.float32)[:, 1]        # rows 27 floats apart
            m = rng.normal(size=(9, columns + 5)).astype(np.float32)[:, 2:2 + columns]
            out = np.full((rows, 2 * columns), np.nan, np.float32)
            product(x, m, out[:, :columns])
            np.testing.assert_allclose(out[:, :columns], x.astype(np.float64) @ m, rtol=1e-5, atol=1e-5)
            assert np.isnan(out[:, columns:]).all()
            across = rng.normal(size=(columns, 9)).astype(np.float32).T       # columns 9 floats apart
            product(x, across, out[:, :columns])
            np.testing.assert_allclose(out[:, :columns], x.astype(np.float64) @ across, rtol=1e-5, atol=1e-5)
