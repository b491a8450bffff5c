"""SplitGrad: the gradient of Split, the outputs' gradients joined along the axis (zeros for outputs without
one)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.grad.concat_grad import axis_parts
from lite.kernels.reshape import normalize_axes
from lite.kernels.split import equal_parts
from lite.status import NotSupportedError


@register("SplitGrad", DataType.FLOAT32)
class SplitGradKernel(Kernel):
    """inputs: x (the forward input), dy0, dy1, ... (omitted ones are zero) -> dx: the dys joined along `axis`.

    An omitted part's size is found from the others: it is the remainder when only one is omitted, else the
    parts must be Split's default equal parts."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, dys = inputs[0], inputs[1:]
        axis = normalize_axes(self, [self.attrs.axis], x.rank)[0]
        if all(d is None for d in dys):
            raise self.error("every output gradient is omitted")
        sizes = self._sizes([None if d is None else d.shape[axis] for d in dys], x.shape[axis])
        for k, (d, size) in enumerate(zip(dys, sizes)):
            if d is not None and d.shape != x.shape[:axis] + (size,) + x.shape[axis + 1:]:
                raise self.error(f"dy{k} {list(d.shape)} does not fit part {k} of x {list(x.shape)}")
        self.parts = axis_parts(x.rank, axis, sizes)
        return [TensorSpec(x.shape, next(d.dtype for d in dys if d is not None))]

    def _sizes(self, known: list[int | None], dim: int) -> list[int]:
        """Every part's size along the axis, given those of the parts present (None for omitted ones)."""
        equal = equal_parts(dim, len(known))
        rest = dim - sum(s for s in known if s is not None)
        if all(s is None or s == e for s, e in zip(known, equal)):
            sizes = equal
        else:
            sizes = [rest if s is None else s for s in known] if known.count(None) == 1 else known
        if None in sizes or sum(sizes) != dim or min(sizes) < 0:
            raise self.error(f"cannot place parts of sizes {known} along a dim of {dim}", NotSupportedError)
        return sizes

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        for dy, part in zip(inputs[1:], self.parts):
            if dy is None:
                outputs[0][part] = 0
            else:
                outputs[0][part] = dy
