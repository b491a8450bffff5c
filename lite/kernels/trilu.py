"""Trilu: the upper (or lower) triangle of the last two axes, the rest zeroed (ONNX Trilu).

Entry (i, j) is kept when j - i >= k (upper) or j - i <= k (lower). k may arrive at run time; a k known at
compile time gives a precomputed mask. Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register


def triangle_mask(rows: int, cols: int, k: int, upper: bool) -> np.ndarray:
    offset = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    return offset >= k if upper else offset <= k


@register("Trilu")
class TriluKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank < 2:
            raise self.error(f"the input must have rank >= 2, got shape {list(x.shape)}")
        k = inputs[1] if len(inputs) > 1 else None
        if k is not None and (k.dtype.kind not in "iu" or int(np.prod(k.shape)) != 1):
            raise self.error(f"k must be one integer, got a {k.dtype} tensor of shape {list(k.shape)}")
        self.mask = None
        if k is None or k.value is not None:
            self.mask = self._mask(x.shape, 0 if k is None else int(k.value.reshape(-1)[0]))
        return [TensorSpec(x.shape, x.dtype)]

    def _mask(self, shape: tuple[int, ...], k: int) -> np.ndarray:
        return triangle_mask(shape[-2], shape[-1], k, bool(self.attrs.upper))

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outputs[0]
        mask = self.mask if self.mask is not None else self._mask(x.shape, int(inputs[1].reshape(-1)[0]))
        out.fill(0)
        np.copyto(out, x, where=mask)
