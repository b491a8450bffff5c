"""The compiled sibling of Activation on float32: GELU (exact and tanh-approximated) in one threaded pass
(`gelu.gelu`, `gelu.gelu_tanh`); the other activations keep the numpy kernel."""
from __future__ import annotations

from typing import Callable, Sequence

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.activation import ActivationKernel
from lite.kernels.compiled import CompiledCall
from schema import fb

KERNELS = {fb.ActivationType.GELU: "gelu", fb.ActivationType.GELU_TANH: "gelu_tanh"}    # in `gelu`


@register("Activation", DataType.FLOAT32, backend="compiled")
class ActivationCompiled(CompiledCall, ActivationKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = self.attrs.type in KERNELS

    def inplace_input(self) -> int | None:
        """Never in place when compiled: LLVM vectorises the pass only for distinct arrays (in place ran 12x
        slower)."""
        return None if self.compiled else super().inplace_input()

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import gelu
        x, out = inputs[0].reshape(-1), outputs[0].reshape(-1)
        return getattr(gelu, KERNELS[self.attrs.type]).bind(len(x) * 16, x, out)
