"""Activation (relu, relu6, sigmoid, tanh, hard-sigmoid/-swish, swish, elu, leaky relu, gelu, hard-tanh) and
PReLU, plus `apply_activation`, which ops with a fused activation call on their output in place."""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import NotSupportedError
from schema import fb

A = fb.ActivationType
_erf = np.frompyfunc(math.erf, 1, 1)


def _sigmoid(x: np.ndarray, out: np.ndarray) -> None:
    # 1 / (1 + exp(-x)), overflow-free for large |x|: exp of a non-positive number only
    e = np.exp(-np.abs(x))
    pos = x >= 0
    np.divide(np.where(pos, 1.0, e), 1.0 + e, out=out)


def _hard_sigmoid(x: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> None:
    np.multiply(x, alpha, out=out)
    out += beta
    np.clip(out, 0.0, 1.0, out=out)


def _elementwise(kind: int, alpha: float, beta: float, lo: float, hi: float
                 ) -> Callable[[np.ndarray, np.ndarray], None]:
    """`f(x, out)` for an activation type; `out` may be `x` itself (in place)."""
    if kind == A.RELU:
        return lambda x, out: np.maximum(x, 0, out=out)
    if kind == A.RELU6:
        return lambda x, out: np.clip(x, 0, 6, out=out)
    if kind == A.HARD_TANH:
        return lambda x, out: np.clip(x, lo, hi, out=out)
    if kind == A.LEAKY_RELU:
        return lambda x, out: np.copyto(out, np.where(x >= 0, x, x * np.float32(alpha)))
    if kind == A.ELU:
        return lambda x, out: np.copyto(out, np.where(x > 0, x, np.float32(alpha) * np.expm1(np.minimum(x, 0))))
    if kind == A.SIGMOID:
        return _sigmoid
    if kind == A.TANH:
        return lambda x, out: np.tanh(x, out=out)
    if kind == A.HSIGMOID:
        return lambda x, out: _hard_sigmoid(x, out, alpha, beta)
    if kind == A.HSWISH:
        def hswish(x: np.ndarray, out: np.ndarray) -> None:
            gate = np.empty_like(x)
            _hard_sigmoid(x, gate, 1.0 / 6.0, 0.5)
            np.multiply(x, gate, out=out)
        return hswish
    if kind == A.SWISH:
        def swish(x: np.ndarray, out: np.ndarray) -> None:
            gate = np.empty_like(x)
            _sigmoid(x, gate)
            np.multiply(x, gate, out=out)
        return swish
    if kind == A.GELU:
        def gelu(x: np.ndarray, out: np.ndarray) -> None:
            cdf = 0.5 * (1.0 + _erf(x / math.sqrt(2.0)).astype(x.dtype))
            np.multiply(x, cdf, out=out)
        return gelu
    raise NotSupportedError(f"activation type {kind} is not supported")


def activation_fn(kind: int, alpha: float = 0.0, beta: float = 0.0, min_val: float = 0.0, max_val: float = 0.0
                  ) -> Callable[[np.ndarray, np.ndarray], None] | None:
    """The in-place activation for a fused `activation` attribute, or None for NO_ACTIVATION."""
    return None if kind == A.NO_ACTIVATION else _elementwise(kind, alpha, beta, min_val, max_val)


def apply_activation(out: np.ndarray, kind: int) -> None:
    """Apply a fused activation to `out` in place (no-op for NO_ACTIVATION)."""
    fn = activation_fn(kind)
    if fn is not None:
        fn(out, out)


@register("Activation")
class ActivationKernel(Kernel):
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a = self.attrs
        self.fn = _elementwise(a.type, a.alpha, a.beta, a.min_val, a.max_val)
        return [TensorSpec(inputs[0].shape, inputs[0].dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.fn(inputs[0], outputs[0])


@register("PReLU")
class PReLUKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, slope = inputs[0], inputs[1]
        shape = np.broadcast_shapes(x.shape, slope.shape)
        if shape != x.shape:
            raise self.error(f"slope {list(slope.shape)} does not broadcast to input {list(x.shape)}")
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, slope = inputs[0], inputs[1]
        np.copyto(outputs[0], np.where(x >= 0, x, x * slope))
