"""MaxUnpool: scatter x's values to the positions `indices` gives in the flattened output (MaxPool's Indices
output, NCHW flat indices; any rank), zeros elsewhere. Works in the source layout, which the indices refer to.
Output shape: (in - 1) * stride + kernel - pads per spatial axis, or the `output_shape` input (known at compile
time, at least that large), which the indices then count positions of: so MaxPool -> MaxUnpool restores the
pooled input's shape, as onnxruntime and PyTorch read it (onnx.reference instead pads the default-shape result
at the end).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, OpExecuteError


def unpooled_shape(kernel: Kernel, x: TensorSpec) -> tuple[int, ...]:
    a, spatial = kernel.attrs, x.rank - 2
    k = list(a.kernel)
    strides, pads = list(a.strides) or [1] * spatial, list(a.pads) or [0] * 2 * spatial
    if len(k) != spatial or len(strides) != spatial or len(pads) != 2 * spatial:
        raise kernel.error(f"kernel {k}, strides {strides} and pads {pads} do not fit {spatial} spatial axes",
                           InvalidOpAttrError)
    dims = [(n - 1) * s + kk - p0 - p1 for n, s, kk, p0, p1 in zip(x.shape[2:], strides, k, pads[:spatial],
                                                                   pads[spatial:])]
    if min(dims, default=1) < 1:
        raise kernel.error(f"kernel {k}, strides {strides} and pads {pads} leave no output", InvalidOpAttrError)
    return (*x.shape[:2], *dims)


@register("MaxUnpool")
class MaxUnpoolKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, indices = inputs[0], inputs[1]
        shape_spec = inputs[2] if len(inputs) > 2 else None
        if x.rank < 3 or indices.shape != x.shape or indices.dtype.kind not in "iu":
            raise self.error(f"x {list(x.shape)} must have rank >= 3 and integer indices of its shape, got "
                             f"{indices.dtype} {list(indices.shape)}")
        shape = unpooled_shape(self, x)
        if shape_spec is not None:
            given = tuple(int(d) for d in self.known(shape_spec, "output_shape").ravel())
            if len(given) != x.rank or given[:2] != x.shape[:2] or any(g < s for g, s in zip(given, shape)):
                raise self.error(f"output_shape {list(given)} must keep N, C of {list(x.shape)} and be at least "
                                 f"{list(shape)}")
            shape = given
        self.size = int(np.prod(shape))
        if indices.value is not None and indices.value.size and not 0 <= indices.value.min() <= \
                indices.value.max() < self.size:
            raise self.error(f"indices must lie in [0, {self.size}), got {indices.value.min()}..{indices.value.max()}")
        return [TensorSpec(shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, indices, out = inputs[0], inputs[1], outputs[0]
        if indices.size and not 0 <= indices.min() <= indices.max() < self.size:
            raise OpExecuteError(f"MaxUnpool node '{self.node.name}': indices must lie in [0, {self.size})")
        out.fill(0)
        out.reshape(-1)[indices.reshape(-1)] = x.reshape(-1)
