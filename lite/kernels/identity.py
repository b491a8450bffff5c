"""Identity: output = input, computed in place when the planner allows."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.traits import ALWAYS, ELEMENTWISE, Layout, declare


declare("Identity", layout=Layout(ELEMENTWISE), noop=ALWAYS)


@register("Identity")
class IdentityKernel(Kernel):
    native_dtypes = True
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        return [TensorSpec(x.shape, x.dtype, x.value)]

    def bind(self, inputs, outputs, scratch) -> None:
        self.copy = not np.shares_memory(inputs[0], outputs[0])

    def idle(self) -> bool:
        return not self.copy

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.copy:
            np.copyto(outputs[0], inputs[0])
