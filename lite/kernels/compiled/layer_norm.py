"""The compiled sibling of LayerNorm on float32 over the last axis, inference form (one output), with constant
scale and bias of the row's length (or none): one threaded pass per row (`normalize.layer_norm_rows`)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.layer_norm import LayerNormKernel


@register("LayerNorm", DataType.FLOAT32, backend="compiled")
class LayerNormCompiled(CompiledCall, LayerNormKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        x, params = inputs[0], [s for s in inputs[1:3] if s is not None]
        self.depth = x.shape[-1]
        self.compiled = (len(self.node.outputs) == 1 and self.attrs.axis % x.rank == x.rank - 1 and x.shape[-1] > 0
                         and all(p.value is not None and p.value.size in (1, x.shape[-1]) for p in params))

    def call_scratch(self) -> list[TensorSpec]:
        return [TensorSpec((self.rows, self.depth), np.dtype(np.float32))]

    def inplace_input(self) -> int | None:
        return None if self.compiled else super().inplace_input()

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import normalize
        x, out = inputs[0], outputs[0]
        depth = x.shape[-1]
        scale = np.broadcast_to(np.asarray(inputs[1], np.float32).reshape(-1), (depth,)).copy()
        bias = np.zeros(depth, np.float32) if len(inputs) < 3 or inputs[2] is None else \
            np.broadcast_to(np.asarray(inputs[2], np.float32).reshape(-1), (depth,)).copy()
        rows = x.reshape(-1, depth)
        return normalize.layer_norm_rows.bind(rows.size * 8, rows, np.float32(self.attrs.epsilon), scale, bias,
                                              out.reshape(rows.shape), scratch[0])
