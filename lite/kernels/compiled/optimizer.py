"""The compiled siblings of Sgd, ApplyMomentum and Adam: each update is one threaded pass (`grad.sgd`,
`grad.adam`), the numpy kernel's float32 steps in the same order, so both agree bit for bit."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import register
from lite.kernels.grad.optimizer import AdamKernel, ApplyMomentumKernel, OptimizerKernel, SgdKernel


class CompiledUpdate(OptimizerKernel):
    """Binds the weight-shaped inputs as flat views and this optimizer's compiled entry point (`entry`)."""
    compiled = True

    def bind(self, inputs, outputs, scratch) -> None:
        super().bind(inputs, outputs, scratch)
        from lite.kernels.compiled import grad
        self.flat = [inputs[i].reshape(-1) for i in (0, *self.shaped)]     # weight-shaped, as views
        self.update = self.entry(grad)

    def entry(self, grad) -> Callable[..., None]:
        """The compiled entry point of this optimizer's update."""
        raise NotImplementedError


@register("Sgd", DataType.FLOAT32, backend="compiled")
class SgdCompiled(CompiledUpdate, SgdKernel):
    def entry(self, grad) -> Callable[..., None]:
        w, g, buf = self.flat
        return grad.sgd.entry(w.size, w, g, buf, *self.scalars_of(1.0, False))

    def scalars_of(self, lr: float, first: bool) -> tuple:
        a, f = self.attrs, np.float32
        return f(a.weight_decay), f(a.momentum), f(1 - a.dampening), bool(a.nesterov), first, f(lr)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        lr, stat = inputs[2], inputs[4]
        self.update(*self.flat, *self.scalars_of(lr.item(), bool(stat.item())))
        stat[...] = 0


@register("ApplyMomentum", DataType.FLOAT32, backend="compiled")
class ApplyMomentumCompiled(CompiledUpdate, ApplyMomentumKernel):
    def entry(self, grad) -> Callable[..., None]:
        w, buf, g = self.flat
        return grad.sgd.entry(w.size, w, g, buf, *self.scalars_of(1.0))

    def scalars_of(self, lr: float) -> tuple:
        a, f = self.attrs, np.float32
        return f(a.weight_decay), f(a.momentum), f(1.0), bool(a.use_nesterov), False, f(lr)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        w, buf, g = self.flat
        self.update(w, g, buf, *self.scalars_of(inputs[2].item()))


@register("Adam", DataType.FLOAT32, backend="compiled")
class AdamCompiled(CompiledUpdate, AdamKernel):
    def entry(self, grad) -> Callable[..., None]:
        return grad.adam.entry(self.flat[0].size, *self.flat, *self.scalars_of(1.0, 1.0))

    def scalars_of(self, t: float, lr: float) -> tuple:
        """`adam_step`'s scalars as numpy rounds them to float32 (NEP 50: a Python float meets a float32
        array as float32)."""
        a, f = self.attrs, np.float32
        bias1, bias2 = 1 - a.beta1 ** t, 1 - a.beta2 ** t
        return (f(1 - lr * a.weight_decay if a.weight_decay else 1), f(1 - a.beta1), f(a.beta1), f(1 - a.beta2),
                f(a.beta2), f(math.sqrt(bias2)), f(a.epsilon), f(lr / bias1))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        step, lr = inputs[3], inputs[4]
        step += 1
        self.update(*self.flat, *self.scalars_of(step.item(), lr.item()))
