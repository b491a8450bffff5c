"""TopK: the k largest (or smallest) entries along `axis` and their int64 indices, in order (ONNX TopK).

Equal values keep the lower index first, as ONNX requires: a stable sort (of the reversed axis for `largest`,
so that no negation is needed and unsigned types work). k must be known at compile time; the output shape
follows from it (`topk_shape`). Any numeric dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from lite.traits import AXIS, Layout, declare


def topk_shape(shape: tuple[int, ...], axis: int, k: np.ndarray) -> tuple[int, ...] | str:
    """The output shape for `k` entries along `axis`, or why `k` is invalid."""
    if k.size != 1 or k.dtype.kind not in "iu":
        return f"k must be one integer, got {k.tolist()}"
    count = int(k.reshape(-1)[0])
    if not 0 <= count <= shape[axis]:
        return f"k = {count} is outside [0, {shape[axis]}] (the size of axis {axis})"
    return shape[:axis] + (count,) + shape[axis + 1:]


def sorted_indices(x: np.ndarray, axis: int, largest: bool) -> np.ndarray:
    """Indices that sort x along axis (descending for `largest`), ties in increasing index order."""
    if not largest:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    ascending = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (n - 1) - np.flip(ascending, axis)


declare("TopK", layout=Layout(AXIS, axis_default=-1))


@register("TopK")
class TopKKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank == 0:
            raise self.error("the input must have rank >= 1")
        self.axis = normalize_axes(self, [self.attrs.axis], x.rank)[0]
        shape = topk_shape(x.shape, self.axis, self.known(inputs[1], "k"))
        if isinstance(shape, str):
            raise self.error(shape)
        self.k = shape[self.axis]
        return [TensorSpec(shape, x.dtype), TensorSpec(shape, np.dtype(np.int64))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        order = sorted_indices(x, self.axis, bool(self.attrs.largest))
        top = np.take(order, np.arange(self.k), axis=self.axis)
        np.copyto(outputs[1], top)
        np.copyto(outputs[0], np.take_along_axis(x, top, axis=self.axis))
