"""The compiled sibling of Softmax on float32 along the last axis: one threaded pass per row
(`normalize.softmax_rows`), never in place (the passes vectorise only over distinct arrays)."""
from __future__ import annotations

from typing import Callable, Sequence

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.softmax import SoftmaxKernel


@register("Softmax", DataType.FLOAT32, backend="compiled")
class SoftmaxCompiled(CompiledCall, SoftmaxKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        x = inputs[0]
        self.compiled = self.axis == x.rank - 1 and x.shape[-1] > 0

    def inplace_input(self) -> int | None:
        return None if self.compiled else super().inplace_input()

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import normalize
        x, out = inputs[0], outputs[0]
        rows = x.reshape(-1, x.shape[-1])
        return normalize.softmax_rows.bind(rows.size * 16, rows, out.reshape(rows.shape))
