"""TensorScatter (ONNX opset 24): write a KV-cache update into the cache at each batch row's write index along
`axis` (circular: wrapping around the cache length). One fancy-indexed assignment for every row."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import ANY, Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, OpExecuteError


@register("TensorScatter", ANY)
class TensorScatterKernel(Kernel):
    """inputs: past_cache, update, write_indices? (int [batch]; default 0) -> present_cache."""
    inplace = True
    native_dtypes = True     # moves values only

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        cache, update = inputs[0], inputs[1]
        indices = inputs[2] if len(inputs) > 2 else None
        if not -cache.rank < self.attrs.axis < cache.rank or self.attrs.axis % cache.rank == 0:
            raise self.error(f"axis {self.attrs.axis} must name a sequence axis after the batch axis of a rank "
                             f"{cache.rank} cache", InvalidOpAttrError)
        self.axis = self.attrs.axis % cache.rank
        if update.rank != cache.rank or update.dtype != cache.dtype or update.shape[self.axis] > \
                cache.shape[self.axis] or any(u != c for a, (u, c) in enumerate(zip(update.shape, cache.shape))
                                              if a != self.axis):
            raise self.error(f"update {list(update.shape)} does not fit cache {list(cache.shape)} along axis "
                             f"{self.axis}")
        if indices is not None and indices.shape != (cache.shape[0],):
            raise self.error(f"write_indices must be [{cache.shape[0]}], got {list(indices.shape)}")
        return [TensorSpec(cache.shape, cache.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        cache, update, out = inputs[0], inputs[1], outputs[0]
        if not np.shares_memory(out, cache):
            np.copyto(out, cache)
        batch, length, steps = cache.shape[0], cache.shape[self.axis], update.shape[self.axis]
        start = inputs[2] if len(inputs) > 2 and inputs[2] is not None else np.zeros(batch, np.int64)
        rows = start.astype(np.int64)[:, None] + np.arange(steps)                 # [batch, steps]
        if self.attrs.circular:
            rows %= length
        elif rows.size and (rows.min() < 0 or rows.max() >= length):
            raise self.error(f"write indices {start.tolist()} + {steps} steps run past the cache length {length}",
                             OpExecuteError)
        target = np.moveaxis(out, self.axis, 1)                                   # [batch, length, ...]
        target[np.arange(batch)[:, None], rows] = np.moveaxis(update, self.axis, 1)
