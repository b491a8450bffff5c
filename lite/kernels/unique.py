"""Unique: the distinct values (or slices along `axis`) of x, sorted or in order of first occurrence, with the
index of each one's first occurrence, the inverse map and the counts (ONNX Unique; all int64).

The outputs' size is the number of distinct values, so x must be known when shapes are inferred
(`unique_outputs`): at compile time today. Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes


def unique_outputs(x: np.ndarray, axis: int | None, sort: bool) -> list[np.ndarray]:
    """[y, indices, inverse_indices, counts] of x (axis None: flattened)."""
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=axis)
    inverse = inverse.reshape(-1)
    if not sort:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        y, first, counts, inverse = np.take(y, order, axis=axis or 0), first[order], counts[order], rank[inverse]
    return [y, *(a.astype(np.int64) for a in (first, inverse, counts))]


@register("Unique")
class UniqueKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = self.known(inputs[0], "the input (its number of distinct values sizes the outputs)")
        self.axis = normalize_axes(self, [self.attrs.axis], x.ndim)[0] if self.attrs.axis_set else None
        return [TensorSpec(a.shape, a.dtype) for a in unique_outputs(x, self.axis, bool(self.attrs.sorted))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out, value in zip(outputs, unique_outputs(inputs[0], self.axis, bool(self.attrs.sorted))):
            np.copyto(out, value)
