"""Split: cut `x` along `axis` into one part per output. Any dtype.

inputs: x, split? (1-D part sizes). Without `split` the parts have ceil(dim / n) elements and the last one takes
what is left (ONNX `num_outputs` semantics, equal parts when the dim divides evenly).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from lite.traits import AXIS, Layout, declare


def equal_parts(dim: int, count: int) -> list[int]:
    """Sizes of `count` parts of ceil(dim / count) elements, the last one smaller (possibly negative)."""
    chunk = math.ceil(dim / count)
    return [chunk] * (count - 1) + [dim - chunk * (count - 1)]


declare("Split", layout=Layout(AXIS))


@register("Split")
class SplitKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        axis = normalize_axes(self, [self.attrs.axis], x.rank)[0]
        count, dim = len(self.node.outputs), x.shape[axis]
        if len(inputs) > 1 and inputs[1] is not None:
            sizes = [int(s) for s in self.known(inputs[1], "split").ravel()]
        else:
            sizes = equal_parts(dim, count)
        if len(sizes) != count or sum(sizes) != dim or min(sizes) < 0:
            raise self.error(f"cannot split dim {dim} of axis {axis} into {count} parts of sizes {sizes}")
        starts = np.cumsum([0] + sizes)
        self.parts = [(slice(None),) * axis + (slice(int(a), int(b)),) for a, b in zip(starts, starts[1:])]
        return [TensorSpec(x.shape[:axis] + (s,) + x.shape[axis + 1:], x.dtype) for s in sizes]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        for out, part in zip(outputs, self.parts):
            np.copyto(out, x[part])
