"""ArgMinMax: int64 indices of the largest (ArgMax) or smallest (ArgMin) entry along `axis` (ONNX ArgMax/ArgMin).

Ties go to the first occurrence, or to the last with `select_last_index` (found as the first one of the axis
reversed). The reduced axis is kept as size 1 when `keep_dims`. Any numeric dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from schema import fb


@register("ArgMinMax")
class ArgMinMaxKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank == 0:
            raise self.error("the input must have rank >= 1")
        self.axis = normalize_axes(self, [self.attrs.axis], x.rank)[0]
        if x.shape[self.axis] == 0:
            raise self.error(f"axis {self.axis} is empty: no extreme to select")
        self.reduced = x.shape[:self.axis] + x.shape[self.axis + 1:]
        self.find = np.argmax if self.attrs.mode == fb.ArgMode.MAX else np.argmin
        self.last = bool(self.attrs.select_last_index)
        keep = x.shape[:self.axis] + (1,) + x.shape[self.axis + 1:]
        return [TensorSpec(keep if self.attrs.keep_dims else self.reduced, np.dtype(np.int64))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outputs[0].reshape(self.reduced)
        if not self.last:
            self.find(x, axis=self.axis, out=out)
            return
        self.find(np.flip(x, self.axis), axis=self.axis, out=out)
        np.subtract(x.shape[self.axis] - 1, out, out=out)
