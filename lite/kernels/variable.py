"""Assign for every data type but float32 (whose kernel is the optimizers' in `grad/optimizer.py`): a variable =
a value of its shape and type, bytes copied, in place. Imported TFLite resource variables (ASSIGN_VARIABLE) write
their state with it, int8 streaming models' included.

A variable is a constant tensor of the file (its initial value) that an Assign writes: a `LiteSession` keeps a
writable copy of it across runs (passed to the compiler as an external array, so nothing reading it is folded),
which `LiteSession.ResetVariables` restores.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import NotSupportedError

@register("Assign")
class AssignKernel(Kernel):
    """inputs: variable, value (same shape and type); no outputs."""
    foldable = False

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        variable, value = inputs[0], inputs[1]
        if value is None or value.shape != variable.shape or value.dtype != variable.dtype:
            raise self.error(f"the value must be a {variable.dtype} {list(variable.shape)} like the variable, got "
                             f"{None if value is None else (value.dtype, list(value.shape))}")
        return []

    def bind(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray],
             scratch: Sequence[np.ndarray]) -> None:
        super().bind(inputs, outputs, scratch)
        if not inputs[0].flags.writeable:
            raise self.error("its variable must be a writable tensor (a session's state)", NotSupportedError)

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(inputs[0], inputs[1])

