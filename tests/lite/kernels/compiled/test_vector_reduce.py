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
