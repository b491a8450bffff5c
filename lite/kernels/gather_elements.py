"""GatherElements: out[i][j][k] = data[i][index[i][j][k]][k] for axis 1, and alike for any axis (ONNX
GatherElements). Output shape: indices.shape. Any dtype; int32/int64 indices, negative ones from the end.

Constant indices are checked and normalised at compile time; run-time indices are checked on each run.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.gather import checked_indices
from lite.kernels.reshape import normalize_axes
from lite.status import OpExecuteError
from lite.traits import AXIS, Layout, declare


def axis_indices(kernel: Kernel, data: TensorSpec, indices: TensorSpec) -> int:
    """The normalised axis of an elementwise gather or scatter, checking indices' rank and dtype."""
    if indices.dtype.kind not in "iu":
        raise kernel.error(f"indices must be integers, got {indices.dtype}")
    if data.rank == 0 or indices.rank != data.rank:
        raise kernel.error(f"indices must have data's rank {data.rank}, got shape {list(indices.shape)}")
    return normalize_axes(kernel, [kernel.attrs.axis], data.rank)[0]


declare("GatherElements", layout=Layout(AXIS, all_inputs=True))


@register("GatherElements")
class GatherElementsKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        data, indices = inputs[0], inputs[1]
        self.axis = axis_indices(self, data, indices)
        if any(i > d for a, (i, d) in enumerate(zip(indices.shape, data.shape)) if a != self.axis):
            raise self.error(f"indices shape {list(indices.shape)} exceeds data shape {list(data.shape)} "
                             f"off axis {self.axis}")
        self.dim = data.shape[self.axis]
        self.indices = None if indices.value is None else checked_indices(self, indices.value, self.dim)
        return [TensorSpec(indices.shape, data.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        data = inputs[0]
        if data.shape != inputs[1].shape:     # smaller index tensors read the leading corner of data
            data = data[tuple(slice(0, n) if a != self.axis else slice(None)
                              for a, n in enumerate(inputs[1].shape))]
        idx = self.indices if self.indices is not None else checked_indices(self, inputs[1], self.dim, OpExecuteError)
        np.copyto(outputs[0], np.take_along_axis(data, idx, axis=self.axis))
