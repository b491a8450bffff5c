"""Shape and ConstantOfShape: the shape-computation ops, known at compile time and so always folded.

Shape: int64 [end - start] dims of x (start/end clamped like ONNX; negative count from the end), any dtype.
ConstantOfShape: input shape (1-D ints); a tensor of that shape and TypeId `data_type` filled with `value`.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.cast import numpy_dtype


def dims_range(shape: Sequence[int], start: int, end: int) -> np.ndarray:
    """shape[start:end] as int64, with ONNX Shape's clamping of start and end."""
    rank = len(shape)
    lo, hi = (min(max(v + rank if v < 0 else v, 0), rank) for v in (start, end))
    return np.array(shape[lo:hi], dtype=np.int64)


@register("Shape")
class ShapeKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        self.value = dims_range(inputs[0].shape, int(self.attrs.start), int(self.attrs.end))
        return [TensorSpec(self.value.shape, self.value.dtype, self.value)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], self.value)


@register("ConstantOfShape")
class ConstantOfShapeKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        shape = self.known(inputs[0], "shape")
        if shape.ndim != 1 or (shape.size and shape.min() < 0):
            raise self.error(f"shape must be 1-D and non-negative, got {shape.tolist()}")
        dtype = numpy_dtype(self, self.attrs.data_type)
        self.fill = np.array(self.attrs.value).astype(dtype)
        return [TensorSpec(tuple(int(d) for d in shape), dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        outputs[0].fill(self.fill)
