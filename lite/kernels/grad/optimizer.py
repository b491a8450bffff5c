"""Optimizers: Sgd, ApplyMomentum, Adam (AdamW with weight decay) and Assign. float32.

Each node updates its weight and state inputs in place and has no outputs; those inputs are the session's
writable variables, and `lr` is a scalar variable read at every step (so SetLearningRate needs no recompile).
The update rules are PyTorch's (torch.optim.SGD, torch.optim.Adam / AdamW), step for step.

The compiled siblings (`compiled/optimizer.py`) run each update as one threaded pass, the same float32
steps in the same order, so both agree bit for bit.

Sgd's momentum buffer `accum` follows torch's, which is created as a copy of the first step's gradient: as in
MindSpore's SGD, a scalar `stat` input is 1 until the first step (which then copies the gradient into the
buffer) and 0 after, so the state survives checkpoints. ApplyMomentum is the undamped case, where a zero buffer
and torch's copy give the same step.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, NotSupportedError


def sgd_step(w: np.ndarray, grad: np.ndarray, lr: float, buf: np.ndarray | None, momentum: float,
             dampening: float, nesterov: bool, weight_decay: float, first: bool,
             decayed: np.ndarray | None, u: np.ndarray) -> None:
    """One torch.optim.SGD step in place. `decayed` (needed when weight_decay != 0) and `u` are w-shaped work."""
    g = grad
    if weight_decay:
        np.multiply(w, weight_decay, out=decayed)
        g = np.add(decayed, grad, out=decayed)                     # g = grad + λ w
    step = g
    if momentum:
        if first:
            np.copyto(buf, g)                                      # b = g
        else:
            buf *= momentum
            buf += np.multiply(g, 1 - dampening, out=u)            # b = μ b + (1 - τ) g
        if nesterov:
            step = np.add(np.multiply(buf, momentum, out=u), g, out=u)   # g + μ b
        else:
            step = buf
    w -= np.multiply(step, lr, out=u)                              # w -= lr step


def adam_step(w: np.ndarray, m: np.ndarray, v: np.ndarray, t: float, lr: float, g: np.ndarray, beta1: float,
              beta2: float, epsilon: float, weight_decay: float, u: np.ndarray) -> None:
    """One torch.optim.AdamW step (Adam when weight_decay = 0) at step number t >= 1, in place; `u` is work."""
    if weight_decay:
        w *= 1 - lr * weight_decay                                 # decoupled weight decay
    m *= beta1
    m += np.multiply(g, 1 - beta1, out=u)                          # m = β1 m + (1 - β1) g
    v *= beta2
    v += np.multiply(np.square(g, out=u), 1 - beta2, out=u)        # v = β2 v + (1 - β2) g²
    bias1, bias2 = 1 - beta1 ** t, 1 - beta2 ** t
    denom = np.add(np.divide(np.sqrt(v, out=u), math.sqrt(bias2), out=u), epsilon, out=u)  # sqrt(v̂) + ε
    w -= np.multiply(np.divide(m, denom, out=u), lr / bias1, out=u)       # w -= lr m / (1 - β1^t) / denom


class OptimizerKernel(Kernel):
    """Shape rule of the in-place updaters: `shaped` inputs have the weight's (input 0's) shape, `scalars` one
    element; `updated` inputs must be writable arrays. No outputs."""
    foldable = False
    shaped: tuple[int, ...] = ()
    scalars: tuple[int, ...] = ()
    updated: tuple[int, ...] = (0,)
    work_buffers = 1

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        w = inputs[0]
        if w.dtype != np.float32:
            raise self.error(f"the weight must be float32, got {w.dtype}", NotSupportedError)
        for i in self.shaped:
            if inputs[i] is None or inputs[i].shape != w.shape:
                raise self.error(f"input {i} must have the weight's shape {list(w.shape)}, got "
                                 f"{None if inputs[i] is None else list(inputs[i].shape)}")
        for i in self.scalars:
            if inputs[i] is None or int(np.prod(inputs[i].shape)) != 1:
                raise self.error(f"input {i} must be a scalar")
        self.weight_shape = w.shape
        return []

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.weight_shape, np.dtype(np.float32))] * self.work_buffers

    def bind(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray],
             scratch: Sequence[np.ndarray]) -> None:
        super().bind(inputs, outputs, scratch)
        for i in self.updated:
            if not inputs[i].flags.writeable:
                raise self.error(f"input {i} is updated in place and must be a writable variable",
                                 NotSupportedError)


@register("Sgd", DataType.FLOAT32)
class SgdKernel(OptimizerKernel):
    """inputs: weight, grad, lr, accum (the momentum buffer), stat (1 before the first step); torch.optim.SGD."""
    shaped, scalars, updated = (1, 3), (2, 4), (0, 3, 4)
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a = self.attrs
        if a.nesterov and (a.momentum <= 0 or a.dampening != 0):
            raise self.error("Nesterov momentum needs momentum > 0 and zero dampening", InvalidOpAttrError)
        self.work_buffers = 2 if a.weight_decay else 1
        return super().infer(inputs)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        w, grad, lr, accum, stat = inputs
        a = self.attrs
        sgd_step(w, grad, lr.item(), accum, a.momentum, a.dampening, a.nesterov, a.weight_decay,
                 bool(stat.item()), self.work[-1] if a.weight_decay else None, self.work[0])
        stat[...] = 0


@register("ApplyMomentum", DataType.FLOAT32)
class ApplyMomentumKernel(OptimizerKernel):
    """inputs: weight, accum, lr, grad: accum = momentum accum + grad (+ weight_decay weight);
    weight -= lr accum, or lr (grad + momentum accum) with Nesterov: torch.optim.SGD without dampening."""
    shaped, scalars, updated = (1, 3), (2,), (0, 1)
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        self.work_buffers = 2 if self.attrs.weight_decay else 1
        return super().infer(inputs)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        w, accum, lr, grad = inputs
        a = self.attrs
        sgd_step(w, grad, lr.item(), accum, a.momentum, 0.0, a.use_nesterov, a.weight_decay, False,
                 self.work[-1] if a.weight_decay else None, self.work[0])


@register("Adam", DataType.FLOAT32)
class AdamKernel(OptimizerKernel):
    """inputs: weight, m, v, step (float32 scalar, the number of steps taken; incremented here), lr, grad."""
    shaped, scalars, updated = (1, 2, 5), (3, 4), (0, 1, 2, 3)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        w, m, v, step, lr, grad = inputs
        a = self.attrs
        step += 1
        adam_step(w, m, v, step.item(), lr.item(), grad, a.beta1, a.beta2, a.epsilon, a.weight_decay, self.work[0])


@register("Assign", DataType.FLOAT32)
class AssignKernel(OptimizerKernel):
    """inputs: variable, value (same shape): variable = value."""
    shaped, work_buffers = (1,), 0

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(inputs[0], inputs[1])
