"""OneHot: `values[1]` where an index hits a position of a new axis of size `depth`, `values[0]` elsewhere
(ONNX OneHot). Indices in [-depth, depth) count (negative ones from the end); others give an all-off row.

`depth` sizes the output, so it must be known at compile time; indices and values may arrive at run time.
Output dtype: the values' dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


@register("OneHot")
class OneHotKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        indices, values = inputs[0], inputs[2]
        depth = self.known(inputs[1], "depth")
        if depth.size != 1 or depth.dtype.kind not in "iuf" or int(depth.reshape(-1)[0]) < 1:
            raise self.error(f"depth must be one positive number, got {depth.tolist()}")
        if values.shape != (2,):
            raise self.error(f"values must be [off, on], got shape {list(values.shape)}")
        rank = indices.rank + 1
        axis = int(self.attrs.axis)
        if not -rank <= axis < rank:
            raise self.error(f"axis {axis} is out of range for a rank-{rank} output", InvalidOpAttrError)
        self.axis, self.depth = axis % rank, int(depth.reshape(-1)[0])
        positions = [1] * rank
        positions[self.axis] = self.depth
        self.positions = np.arange(self.depth).reshape(positions)
        shape = indices.shape[:self.axis] + (self.depth,) + indices.shape[self.axis:]
        return [TensorSpec(shape, values.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        indices, values, out = inputs[0], inputs[2], outputs[0]
        idx = np.expand_dims(indices.astype(np.int64), self.axis)
        hit = (np.where(idx < 0, idx + self.depth, idx) == self.positions)
        out.fill(values[0])
        np.copyto(out, values[1], where=hit)
