"""The compiled siblings of int8 Add and Mul: inputs of one shape look their pairs up in the table as one fused
threaded pass (`int8.pair_table`) instead of building byte-pair indices first."""
from __future__ import annotations

from typing import Callable, Sequence

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.int8.arithmetic import AddInt8Kernel, BinaryInt8Kernel, MulInt8Kernel


class PairTable(CompiledCall, BinaryInt8Kernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = inputs[0].shape == inputs[1].shape

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import int8
        flat = [v.reshape(-1) for v in (inputs[0], inputs[1], outputs[0])]
        return int8.pair_table.bind(len(flat[2]), flat[0], flat[1], self.table, flat[2])


@register("Add", DataType.INT8, quantized=True, backend="compiled")
class AddInt8Compiled(PairTable, AddInt8Kernel):
    pass


@register("Mul", DataType.INT8, quantized=True, backend="compiled")
class MulInt8Compiled(PairTable, MulInt8Kernel):
    pass
