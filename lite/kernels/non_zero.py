"""NonZero: the int64 coordinates [rank, count] of x's non-zero entries in row-major order (ONNX NonZero).

The output's size is the count of non-zero entries, so x's values must be known when shapes are inferred
(`nonzero_shape`): at compile time (a constant or folded input) today. Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register


def nonzero_shape(x: np.ndarray) -> tuple[int, int]:
    return (x.ndim, int(np.count_nonzero(x)))


@register("NonZero")
class NonZeroKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = self.known(inputs[0], "the input (its count of non-zero entries sizes the output)")
        return [TensorSpec(nonzero_shape(x), np.dtype(np.int64))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if inputs[0].ndim:
            np.copyto(outputs[0], np.nonzero(inputs[0]))
