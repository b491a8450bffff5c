"""ScatterND: a copy of `data` with slices `updates` written (or combined by `reduction`) at the coordinates
the last axis of `indices` gives (ONNX ScatterND). updates.shape = indices.shape[:-1] + data.shape[k:].
Any dtype; negative coordinates count from the end.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.gather_nd import check_index_tuple, linear_indices
from lite.kernels.scatter_elements import reduction_of, scatter_into
from lite.status import OpExecuteError


@register("ScatterND")
class ScatterNDKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        data, indices, updates = inputs[0], inputs[1], inputs[2]
        k = check_index_tuple(self, indices, data.rank)
        self.reduction = reduction_of(self)
        self.dims, rest = data.shape[:k], data.shape[k:]
        if updates.shape != indices.shape[:-1] + rest or updates.dtype != data.dtype:
            raise self.error(f"updates ({updates.dtype} {list(updates.shape)}) must be "
                             f"{data.dtype} {list(indices.shape[:-1] + rest)}")
        self.out_view = (int(np.prod(self.dims, dtype=np.int64)), *rest)
        self.updates_view = (-1, *rest)
        self.lin = None if indices.value is None else linear_indices(self, indices.value, self.dims).reshape(-1)
        return [TensorSpec(data.shape, data.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        lin = self.lin if self.lin is not None else linear_indices(self, inputs[1], self.dims,
                                                                    OpExecuteError).reshape(-1)
        np.copyto(outputs[0], inputs[0])
        scatter_into(outputs[0].reshape(self.out_view), (lin,), inputs[2].reshape(self.updates_view),
                     self.reduction)
