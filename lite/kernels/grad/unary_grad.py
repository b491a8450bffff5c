"""Gradients of the unary math ops: NegGrad, SqrtGrad, ExpGrad, LogGrad, AbsGrad, ErfGrad (dy, one forward tensor ->
dx). float32. Abs' gradient is 0 at 0, as in PyTorch autograd.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register

# rule(dy, t, out) where t is the forward tensor the op's schema comment names (x or y)
Rule = Callable[[np.ndarray, np.ndarray | None, np.ndarray], None]


class UnaryGradKernel(Kernel):
    """inputs: dy, then x or y of the forward (same shape; NegGrad takes dy only) -> dx. dx may reuse dy.
    Subclasses give `rule` and whether it reads the forward tensor."""
    inplace = True
    reads_forward = True
    rule: Rule

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy = inputs[0]
        if self.reads_forward and (len(inputs) < 2 or inputs[1] is None or inputs[1].shape != dy.shape):
            raise self.error(f"needs the forward tensor of dy's shape {list(dy.shape)} as its second input")
        return [TensorSpec(dy.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        self.rule(inputs[0], inputs[1] if len(inputs) > 1 else None, outputs[0])


@register("NegGrad", DataType.FLOAT32)
class NegGradKernel(UnaryGradKernel):
    reads_forward = False
    rule = staticmethod(lambda dy, _, out: np.negative(dy, out=out))                              # -dy


@register("SqrtGrad", DataType.FLOAT32)
class SqrtGradKernel(UnaryGradKernel):
    rule = staticmethod(lambda dy, y, out: np.multiply(np.divide(dy, y, out=out), 0.5, out=out))  # dy / (2 sqrt x)


@register("ExpGrad", DataType.FLOAT32)
class ExpGradKernel(UnaryGradKernel):
    rule = staticmethod(lambda dy, y, out: np.multiply(dy, y, out=out))                           # dy * exp x


@register("LogGrad", DataType.FLOAT32)
class LogGradKernel(UnaryGradKernel):
    rule = staticmethod(lambda dy, x, out: np.divide(dy, x, out=out))                             # dy / x


@register("AbsGrad", DataType.FLOAT32)
class AbsGradKernel(UnaryGradKernel):
    rule = staticmethod(lambda dy, x, out: np.multiply(dy, np.sign(x), out=out))                  # dy * sign x


@register("ErfGrad", DataType.FLOAT32)
class ErfGradKernel(UnaryGradKernel):
    rule = staticmethod(lambda dy, x, out: np.multiply(dy, np.exp(-np.square(x)) * (2 / np.sqrt(np.pi)), out=out))
