"""Compress: the slices of x along `axis` (or the entries of flattened x) where `condition` is true (ONNX
Compress). A condition shorter than the axis drops the slices past its end.

The output's size is the condition's count of true entries, so the condition must be known when shapes are
inferred (`compress_shape`): at compile time today. Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes


def compress_shape(shape: tuple[int, ...], axis: int | None, condition: np.ndarray) -> tuple[int, ...] | str:
    """The output shape (axis None: of flattened x), or why the condition does not fit."""
    dim = int(np.prod(shape, dtype=np.int64)) if axis is None else shape[axis]
    if condition.ndim != 1 or condition.size > dim:
        return f"condition must be 1-D with at most {dim} entries, got shape {list(condition.shape)}"
    count = int(np.count_nonzero(condition))
    return (count,) if axis is None else shape[:axis] + (count,) + shape[axis + 1:]


@register("Compress")
class CompressKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        condition = self.known(inputs[1], "condition (its count of true entries sizes the output)")
        self.axis = None if self.attrs.flatten else normalize_axes(self, [self.attrs.axis], x.rank)[0]
        shape = compress_shape(x.shape, self.axis, condition)
        if isinstance(shape, str):
            raise self.error(shape)
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.compress(inputs[1].astype(bool), inputs[0], axis=self.axis, out=outputs[0])
