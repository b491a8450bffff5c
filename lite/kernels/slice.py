"""Slice: x[starts:ends:steps] along `axes`, with ONNX's clamping rules. Any dtype.

inputs: x, starts, ends, axes? (default 0..len(starts)-1), steps? (default 1), all 1-D ints (read at run time
when they are run-time values). Negative starts/ends count from the end; out-of-range values (INT64_MAX /
INT64_MIN sentinels included) are clamped; negative steps walk backwards.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes


def axis_slice(dim: int, start: int, end: int, step: int) -> slice:
    """The Python slice selecting ONNX Slice's elements of one axis of length `dim` (step != 0)."""
    if dim == 0:
        return slice(0, 0, step)
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return slice(min(max(start, 0), dim), min(max(end, 0), dim), step)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return slice(start, None if end < 0 else end, step)


@register("Slice")
class SliceKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        inputs = list(inputs) + [None] * (5 - len(inputs))
        starts = [int(v) for v in self.known(inputs[1], "starts").ravel()]
        ends = [int(v) for v in self.known(inputs[2], "ends").ravel()]
        axes = (normalize_axes(self, self.known(inputs[3], "axes").ravel(), x.rank, "axes")
                if inputs[3] is not None else list(range(len(starts))))
        steps = [int(v) for v in self.known(inputs[4], "steps").ravel()] if inputs[4] is not None \
            else [1] * len(starts)
        if not len(starts) == len(ends) == len(axes) == len(steps) or len(axes) > x.rank:
            raise self.error(f"starts, ends, axes and steps have lengths {len(starts)}, {len(ends)}, "
                             f"{len(axes)}, {len(steps)} for rank {x.rank}")
        if 0 in steps:
            raise self.error("steps must not be 0")
        index = [slice(None)] * x.rank
        for a, s, e, st in zip(axes, starts, ends, steps):
            index[a] = axis_slice(x.shape[a], s, e, st)
        self.index = tuple(index)
        shape = tuple(len(range(*sl.indices(d))) for sl, d in zip(self.index, x.shape))
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], inputs[0][self.index])

    def direct(self, inputs, outputs):
        return np.copyto, outputs[0], inputs[0][self.index]
