"""Expand: x broadcast to `shape` with numpy's (bidirectional) rules (ONNX Expand). Any dtype.

`shape` sizes the output, so it must be known at compile time (`expand_shape` computes the output shape from it).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register


def expand_shape(shape: tuple[int, ...], target: np.ndarray) -> tuple[int, ...] | str:
    """The broadcast of `shape` and the 1-D `target`, or why they do not broadcast."""
    if target.ndim != 1 or target.dtype.kind not in "iu":
        return f"shape must be a 1-D integer tensor, got {target.dtype} of shape {list(target.shape)}"
    try:
        return tuple(int(d) for d in np.broadcast_shapes(shape, tuple(int(d) for d in target)))
    except ValueError:
        return f"shape {list(shape)} cannot be broadcast to {target.tolist()}"


@register("Expand")
class ExpandKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        shape = expand_shape(x.shape, self.known(inputs[1], "shape"))
        if isinstance(shape, str):
            raise self.error(shape)
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], inputs[0])
