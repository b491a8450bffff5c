"""ScatterElements: a copy of `data` with `updates` written (or combined by `reduction`: add, mul, max, min) at
the positions `indices` gives along `axis`, the other coordinates those of the update (ONNX ScatterElements,
and the older Scatter). Any dtype; int32/int64 indices, negative ones from the end.

Duplicate indices without a reduction leave one of the updates, as ONNX allows; reductions apply every one
(`ufunc.at`).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.gather import checked_indices
from lite.kernels.gather_elements import axis_indices
from lite.status import OpExecuteError
from lite.traits import AXIS, Layout, declare
from schema import fb

R = fb.ScatterReduction
UFUNCS: dict[int, np.ufunc] = {R.ADD: np.add, R.MUL: np.multiply, R.MAX: np.maximum, R.MIN: np.minimum}


def scatter_into(out: np.ndarray, where: tuple, updates: np.ndarray, reduction: int) -> None:
    """Write (or reduce) `updates` into `out` at the fancy index `where`."""
    if reduction == R.NONE:
        out[where] = updates
    else:
        UFUNCS[reduction].at(out, where, updates)


def reduction_of(kernel: Kernel) -> int:
    reduction = int(kernel.attrs.reduction)
    if reduction != R.NONE and reduction not in UFUNCS:
        raise kernel.error(f"unknown reduction {reduction}")
    return reduction


declare("ScatterElements", layout=Layout(AXIS, all_inputs=True))


@register("ScatterElements")
class ScatterElementsKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        data, indices, updates = inputs[0], inputs[1], inputs[2]
        self.axis = axis_indices(self, data, indices)
        self.reduction = reduction_of(self)
        if updates.shape != indices.shape or updates.dtype != data.dtype:
            raise self.error(f"updates ({updates.dtype} {list(updates.shape)}) must have the shape of indices "
                             f"{list(indices.shape)} and the type of data ({data.dtype})")
        if any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != self.axis):
            raise self.error(f"indices shape {list(indices.shape)} exceeds data shape {list(data.shape)} "
                             f"off axis {self.axis}")
        self.dim = data.shape[self.axis]
        self.grid = list(np.ogrid[tuple(slice(0, n) for n in indices.shape)])
        self.where = None if indices.value is None else self._where(checked_indices(self, indices.value, self.dim))
        return [TensorSpec(data.shape, data.dtype)]

    def _where(self, idx: np.ndarray) -> tuple:
        return tuple(idx if a == self.axis else g for a, g in enumerate(self.grid))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        where = self.where
        if where is None:
            where = self._where(checked_indices(self, inputs[1], self.dim, OpExecuteError))
        np.copyto(outputs[0], inputs[0])
        scatter_into(outputs[0], where, inputs[2], self.reduction)
