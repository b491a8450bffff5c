"""GatherND: slices of `data` addressed by the last axis of `indices` (k coordinates each), after `batch_dims`
shared leading axes (ONNX GatherND). Output: indices.shape[:-1] + data.shape[batch_dims + k:]. Any dtype.

The k coordinates become one linear index into the flattened addressed axes, so the gather is one fancy
index. Constant indices are checked and linearised at compile time, run-time ones on each run.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InferShapeError, InvalidOpAttrError, LiteError, OpExecuteError


def linear_indices(kernel: Kernel, indices: np.ndarray, dims: tuple[int, ...],
                   kind: type[LiteError] = InferShapeError) -> np.ndarray:
    """Coordinates [..., k] into axes of sizes `dims` (negative ones from the end) as flat indices [...];
    a coordinate out of range raises the kernel's error of `kind`."""
    idx = indices.astype(np.int64)
    size = np.array(dims, np.int64)
    bad = (idx < -size) | (idx >= size)
    if bad.any():
        where = np.argwhere(bad)[0]
        raise kernel.error(f"index {int(idx[tuple(where)])} is out of range [-{dims[where[-1]]}, "
                           f"{dims[where[-1]]}) for coordinate {int(where[-1])} of indices", kind)
    idx = np.where(idx < 0, idx + size, idx)
    return np.ravel_multi_index(tuple(np.moveaxis(idx, -1, 0)), dims) if dims else np.zeros(idx.shape[:-1], np.intp)


def check_index_tuple(kernel: Kernel, indices: TensorSpec, addressable: int) -> int:
    """k, the coordinates per index, checked against the number of axes they can address."""
    if indices.dtype.kind not in "iu":
        raise kernel.error(f"indices must be integers, got {indices.dtype}")
    if indices.rank == 0 or not 1 <= indices.shape[-1] <= addressable:
        raise kernel.error(f"the last axis of indices (shape {list(indices.shape)}) must hold 1 to {addressable} "
                           f"coordinates")
    return indices.shape[-1]


@register("GatherND")
class GatherNDKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        data, indices = inputs[0], inputs[1]
        b = int(self.attrs.batch_dims)
        if not 0 <= b < min(data.rank, indices.rank):
            raise self.error(f"batch_dims {b} must be in [0, {min(data.rank, indices.rank)})", InvalidOpAttrError)
        if data.shape[:b] != indices.shape[:b]:
            raise self.error(f"the first {b} dims of data {list(data.shape)} and indices {list(indices.shape)} "
                             f"differ")
        k = check_index_tuple(self, indices, data.rank - b)
        self.dims, rest = data.shape[b:b + k], data.shape[b + k:]
        batch = int(np.prod(data.shape[:b], dtype=np.int64))
        self.data_view = (batch, int(np.prod(self.dims, dtype=np.int64)), *rest)
        self.lin_view = (batch, -1)
        self.batch = np.arange(batch)[:, None]
        self.lin = None if indices.value is None else linear_indices(self, indices.value, self.dims)
        return [TensorSpec(indices.shape[:-1] + rest, data.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        lin = self.lin if self.lin is not None else linear_indices(self, inputs[1], self.dims, OpExecuteError)
        picked = inputs[0].reshape(self.data_view)[self.batch, lin.reshape(self.lin_view)]
        np.copyto(outputs[0], picked.reshape(outputs[0].shape))
