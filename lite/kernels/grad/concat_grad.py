"""ConcatGrad: the gradient of Concat, dy cut back into the inputs along the axis."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes


Index = tuple[slice, ...]


def axis_parts(rank: int, axis: int, sizes: Sequence[int]) -> list[Index]:
    """Consecutive slices of `sizes` elements along `axis` of a rank-`rank` tensor."""
    starts = np.cumsum([0, *sizes]).tolist()
    return [(slice(None),) * axis + (slice(a, b),) + (slice(None),) * (rank - axis - 1)
            for a, b in zip(starts, starts[1:])]


@register("ConcatGrad", DataType.FLOAT32)
class ConcatGradKernel(Kernel):
    """inputs: dy, x0, x1, ... (the forward inputs) -> dx0, dx1, ...: dy cut along `axis` at the inputs' sizes."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, xs = inputs[0], inputs[1:]
        if len(xs) != len(self.node.outputs) or any(x is None for x in xs):
            raise self.error(f"takes dy and the {len(self.node.outputs)} forward inputs, got {len(inputs)} inputs")
        axis = normalize_axes(self, [self.attrs.axis], dy.rank)[0]
        sizes = [x.shape[axis] for x in xs]
        if sum(sizes) != dy.shape[axis]:
            raise self.error(f"inputs of sizes {sizes} along axis {axis} do not make dy {list(dy.shape)}")
        self.parts = axis_parts(dy.rank, axis, sizes)
        return [TensorSpec(x.shape, dy.dtype) for x in xs]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out, part in zip(outputs, self.parts):
            np.copyto(out, inputs[0][part])
