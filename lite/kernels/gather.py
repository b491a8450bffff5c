"""Gather: take entries of `data` along `axis` at `indices` (any shape, negative ones count from the end).
Output shape: data.shape[:axis] + indices.shape + data.shape[axis+1:]. Any dtype; int32/int64 indices.

Constant indices are checked and normalised at compile time; indices computed at run time are checked by numpy.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InferShapeError, LiteError
from lite.kernels.reshape import normalize_axes


def normalized_indices(indices: np.ndarray, dim: int) -> tuple[np.ndarray, int | None]:
    """(`indices` mapped into [0, dim), the first index outside [-dim, dim) or None)."""
    idx = indices.astype(np.intp)
    bad = idx[(idx < -dim) | (idx >= dim)]
    return np.where(idx < 0, idx + dim, idx), (int(bad.flat[0]) if bad.size else None)


def checked_indices(kernel: Kernel, indices: np.ndarray, dim: int,
                    kind: type[LiteError] = InferShapeError) -> np.ndarray:
    """`indices` mapped into [0, dim); an index outside [-dim, dim) raises the kernel's error of `kind` (a shape
    error for constant indices at compile time, an execution error for run-time ones)."""
    idx, bad = normalized_indices(indices, dim)
    if bad is not None:
        raise kernel.error(f"index {bad} is out of range [-{dim}, {dim})", kind)
    return idx


@register("Gather")
class GatherKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        data, indices = inputs[0], inputs[1]
        if data.rank == 0:
            raise self.error("data must have rank >= 1")
        if indices.dtype.kind not in "iu":
            raise self.error(f"indices must be integers, got {indices.dtype}")
        axis = normalize_axes(self, [self.attrs.axis], data.rank)[0]
        dim = data.shape[axis]
        self.axis, self.indices = axis, None
        if indices.value is not None:
            self.indices, bad = normalized_indices(indices.value, dim)
            if bad is not None:
                raise self.error(f"index {bad} is out of range for axis {axis} of size {dim}")
        return [TensorSpec(data.shape[:axis] + indices.shape + data.shape[axis + 1:], data.dtype)]

    def direct(self, inputs, outputs):
        """One constant index: a copy of the slice it selects."""
        if self.indices is None or self.indices.ndim:
            return None
        return np.copyto, outputs[0], inputs[0][(slice(None),) * self.axis + (int(self.indices),)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.indices is not None:
            np.take(inputs[0], self.indices, axis=self.axis, out=outputs[0], mode="clip")
        else:
            np.take(inputs[0], inputs[1], axis=self.axis, out=outputs[0])
