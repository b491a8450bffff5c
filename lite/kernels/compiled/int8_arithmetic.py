"""The compiled siblings of int8 Add and Mul: inputs of one shape look their pairs up in the table as one fused
threaded pass (`int8.pair_table`) instead of building byte-pair indices first."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.int8.arithmetic import AddInt8Kernel, BinaryInt8Kernel, MulInt8Kernel


class PairTable(BinaryInt8Kernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = inputs[0].shape == inputs[1].shape

    def scratch(self) -> list[TensorSpec]:
        return [] if self.compiled else super().scratch()

    def bind(self, inputs, outputs, scratch) -> None:
        if not self.compiled:
            super().bind(inputs, outputs, scratch)
            return
        from lite.kernels.compiled import int8
        flat = [v.reshape(-1) for v in (inputs[0], inputs[1], outputs[0])]
        self.call = int8.pair_table.bind(len(flat[2]), flat[0], flat[1], self.table, flat[2])

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.compiled:
            self.call()
        else:
            super().run(inputs, outputs)


@register("Add", DataType.INT8, quantized=True, backend="compiled")
class AddInt8Compiled(PairTable, AddInt8Kernel):
    pass


@register("Mul", DataType.INT8, quantized=True, backend="compiled")
class MulInt8Compiled(PairTable, MulInt8Kernel):
    pass
