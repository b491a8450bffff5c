"""Per-channel and per-row sums for the normalisation ops and the gradient kernels.

Sums are BLAS matrix-vector products with a vector of ones: on a [M, C] array `ones @ x` is 5-20x faster than
`np.add.reduce(x, axis=0)` (which walks M rows one at a time) and more accurate (BLAS accumulates in blocks).
Channel statistics view a tensor as [A, C, B]: A the axes before the channel axis, B those after it (B = 1 for
NHWC channels-last).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np


@lru_cache(maxsize=64)
def ones(n: int) -> np.ndarray:
    """A read-only float32 vector of n ones, shared by every caller."""
    v = np.ones(n, np.float32)
    v.flags.writeable = False
    return v


def column_sums(x2d: np.ndarray, out: np.ndarray) -> None:
    """out [C] = the sum of the rows of x [M, C]."""
    np.matmul(ones(x2d.shape[0]), x2d, out=out)


def row_sums(x2d: np.ndarray, out: np.ndarray) -> None:
    """out [M] = the sum of each row of x [M, K]."""
    np.matmul(x2d, ones(x2d.shape[1]), out=out)


def as_channels(x: np.ndarray, axis: int) -> np.ndarray:
    """The [A, C, B] view of `x` with channel axis `axis` (x must be contiguous)."""
    a = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(a, x.shape[axis], -1)


def channel_sums(x3d: np.ndarray, out: np.ndarray) -> None:
    """out [C] = the sum of x [A, C, B] over A and B."""
    a, c, b = x3d.shape
    if b == 1:
        column_sums(x3d.reshape(a, c), out)
        return
    inner = np.empty(a * c, x3d.dtype)
    row_sums(x3d.reshape(a * c, b), inner)
    column_sums(inner.reshape(a, c), out)


def channel_dots(u3d: np.ndarray, v3d: np.ndarray, out: np.ndarray) -> None:
    """out [C] = the sum of u * v over A and B (u, v [A, C, B]), with no full-size temporary."""
    np.einsum("acb,acb->c", u3d, v3d, out=out)
