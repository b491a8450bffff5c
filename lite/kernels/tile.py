"""Tile: x repeated `repeats[d]` times along each axis d (ONNX Tile). Any dtype.

The output, viewed as [r0, d0, r1, d1, ...], is x broadcast along the r axes: one copy, no temporary.
`repeats` sizes the output, so it must be known at compile time.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.traits import ONE_PER_AXIS, PER_AXIS, Layout, declare


def interleaved(shape: Sequence[int], repeats: Sequence[int]) -> tuple[int, ...]:
    """(r0, d0, r1, d1, ...): the tiled output's shape with each axis split into repeat and source dims."""
    return tuple(n for pair in zip(repeats, shape) for n in pair)


declare("Tile", layout=Layout(PER_AXIS, per_axis=((1, ONE_PER_AXIS),)))


@register("Tile")
class TileKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, repeats = inputs[0], self.known(inputs[1], "repeats")
        if repeats.dtype.kind not in "iu" or repeats.shape != (x.rank,) or (repeats.size and repeats.min() < 0):
            raise self.error(f"repeats must be {x.rank} non-negative integers (one per axis), "
                             f"got {repeats.tolist()}")
        self.repeats = tuple(int(r) for r in repeats)
        self.split = interleaved(x.shape, self.repeats)
        self.source = interleaved(x.shape, (1,) * x.rank)
        return [TensorSpec(tuple(d * r for d, r in zip(x.shape, self.repeats)), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0].reshape(self.split), inputs[0].reshape(self.source))
