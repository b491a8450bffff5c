"""ActivationGrad: dx = dy * f'(x) from the forward INPUT x, for every activation the Activation kernel runs;
PReLUGrad, which also gives the slope its gradient.

Smooth derivatives write f'(x) into dx with whole-array numpy passes (no `np.where`), then dx *= dy; clipping
activations multiply dy by a boolean mask of the open interval where they pass x through (1.5x faster than
building a float 0/1 factor first); their compiled sibling (`compiled/activation_grad.py`) selects dy in one
threaded pass. Values at the kinks follow PyTorch autograd: relu'(0) = 0, hardtanh and relu6 are 0 on their clip
bounds, hardswish' is 0 and 1 at -3 and 3.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.activation import A, Activation, hard_sigmoid, sigmoid, softplus, tanh_cdf
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to
from lite.kernels.unary import erf
from lite.status import NotSupportedError

Derivative = Callable[[np.ndarray, np.ndarray], None]              # (x, out): out = f'(x); out is never x
Gradient = Callable[[np.ndarray, np.ndarray, np.ndarray], None]    # (dy, x, out): out = dy * f'(x)


def open_interval(v: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """The boolean mask lo < v < hi."""
    mask = np.greater(v, lo)
    mask &= np.less(v, hi)
    return mask


def scaled(slope: Derivative) -> Gradient:
    """dy * f'(x) from f'."""
    def gradient(dy: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
        slope(x, out)
        out *= dy
    return gradient


def passed_between(lo: float, hi: float) -> Gradient:
    """The gradient of a clip to [lo, hi]: dy where lo < x < hi, else 0."""
    def gradient(dy: np.ndarray, x: np.ndarray, out: np.ndarray) -> None:
        np.multiply(dy, open_interval(x, lo, hi), out=out)
    return gradient


def positive(x: np.ndarray, out: np.ndarray) -> None:
    np.greater(x, 0.0, out=out)


def leaky_slope(x: np.ndarray, out: np.ndarray, slope: float) -> None:
    """1 for x > 0, `slope` below."""
    positive(x, out)
    out *= 1.0 - slope
    out += slope


def elu_slope(x: np.ndarray, out: np.ndarray, alpha: float) -> None:
    """1 for x > 0, alpha * exp(x) below: alpha * exp(min(x, 0)) + (1 - alpha) * [x > 0]."""
    step = np.greater(x, 0.0).astype(x.dtype)
    step *= 1.0 - alpha
    np.clip(x, -np.inf, 0.0, out=out)
    np.exp(out, out=out)
    out *= alpha
    out += step


def sigmoid_slope(x: np.ndarray, out: np.ndarray) -> None:
    """s * (1 - s), s = sigmoid(x)."""
    sigmoid(x, out)
    rest = np.subtract(1.0, out, dtype=out.dtype)
    out *= rest


def tanh_slope(x: np.ndarray, out: np.ndarray) -> None:
    """1 - tanh(x)^2."""
    np.tanh(x, out=out)
    np.square(out, out=out)
    np.subtract(1.0, out, out=out)


def hard_sigmoid_slope(x: np.ndarray, out: np.ndarray, alpha: float, beta: float) -> None:
    """alpha where 0 < alpha * x + beta < 1, else 0."""
    np.multiply(x, alpha, out=out)
    out += beta
    np.multiply(open_interval(out, 0.0, 1.0), alpha, out=out)


def normal_cdf(x: np.ndarray, out: np.ndarray) -> None:
    """Phi(x) = (1 + erf(x / sqrt(2))) / 2."""
    np.multiply(x, 1.0 / math.sqrt(2.0), out=out)
    erf(out, out)
    out += 1.0
    out *= 0.5


def normal_pdf(x: np.ndarray, out: np.ndarray) -> None:
    """phi(x) = exp(-x^2 / 2) / sqrt(2 pi)."""
    np.square(x, out=out)
    out *= -0.5
    np.exp(out, out=out)
    out *= 1.0 / math.sqrt(2.0 * math.pi)


def tanh_cdf_slope(x: np.ndarray, out: np.ndarray) -> None:
    """d/dx of GELU_TANH's gate: (1 - t^2) / 2 * sqrt(2 / pi) * (1 + 3 * 0.044715 x^2), t its tanh."""
    c = math.sqrt(2.0 / math.pi)
    t = np.multiply(x, x)
    t *= 0.044715
    t += 1.0
    t *= x
    t *= c
    np.tanh(t, out=t)
    np.multiply(t, t, out=t)
    np.subtract(1.0, t, out=t)
    np.multiply(x, x, out=out)
    out *= 3 * 0.044715
    out += 1.0
    out *= t
    out *= 0.5 * c


def gated_slope(gate: Activation, gate_slope: Derivative) -> Derivative:
    """(x * g(x))' = g(x) + x * g'(x): swish, hard-swish and gelu."""
    def slope(x: np.ndarray, out: np.ndarray) -> None:
        term = np.empty_like(out)
        gate_slope(x, term)
        term *= x
        gate(x, out)
        out += term
    return slope


def softsign_slope(x: np.ndarray, out: np.ndarray) -> None:
    """1 / (1 + |x|)^2."""
    np.abs(x, out=out)
    out += 1.0
    np.square(out, out=out)
    np.reciprocal(out, out=out)


def mish_slope(x: np.ndarray, out: np.ndarray) -> None:
    """t + x * sigmoid(x) * (1 - t^2), t = tanh(softplus(x))."""
    t = np.empty_like(out)
    softplus(x, t)
    np.tanh(t, out=t)
    sigmoid(x, out)
    out *= x
    out *= 1.0 - t * t
    out += t


def celu_slope(x: np.ndarray, out: np.ndarray, alpha: float) -> None:
    """exp(min(x, 0) / alpha): 1 for x > 0."""
    np.clip(x, -np.inf, 0.0, out=out)
    out *= 1.0 / alpha
    np.exp(out, out=out)


def selu_slope(x: np.ndarray, out: np.ndarray, alpha: float, gamma: float) -> None:
    """gamma * elu'(x)."""
    elu_slope(x, out, alpha)
    out *= gamma


def outside(x: np.ndarray, out: np.ndarray, threshold: float) -> None:
    """1 where |x| > threshold (shrink passes x through there), else 0."""
    np.abs(x, out=out)
    np.greater(out, threshold, out=out)


Params = tuple[float, float, float, float]     # alpha, beta, min_val, max_val
GRADIENTS: dict[int, Callable[[Params], Gradient]] = {
    A.RELU: lambda p: scaled(positive),
    A.RELU6: lambda p: passed_between(0.0, 6.0),
    A.HARD_TANH: lambda p: passed_between(p[2], p[3]),
    A.LEAKY_RELU: lambda p: scaled(lambda x, out: leaky_slope(x, out, p[0])),
    A.ELU: lambda p: scaled(lambda x, out: elu_slope(x, out, p[0])),
    A.SIGMOID: lambda p: scaled(sigmoid_slope),
    A.TANH: lambda p: scaled(tanh_slope),
    A.HSIGMOID: lambda p: scaled(lambda x, out: hard_sigmoid_slope(x, out, p[0], p[1])),
    A.HSWISH: lambda p: scaled(gated_slope(lambda x, out: hard_sigmoid(x, out, 1.0 / 6.0, 0.5),
                                           lambda x, out: hard_sigmoid_slope(x, out, 1.0 / 6.0, 0.5))),
    A.SWISH: lambda p: scaled(gated_slope(sigmoid, sigmoid_slope)),
    A.GELU: lambda p: scaled(gated_slope(normal_cdf, normal_pdf)),
    A.GELU_TANH: lambda p: scaled(gated_slope(tanh_cdf, tanh_cdf_slope)),
    A.SOFTPLUS: lambda p: scaled(sigmoid),
    A.SOFTSIGN: lambda p: scaled(softsign_slope),
    A.MISH: lambda p: scaled(mish_slope),
    A.CELU: lambda p: scaled(lambda x, out: celu_slope(x, out, p[0])),
    A.SELU: lambda p: scaled(lambda x, out: selu_slope(x, out, p[0], p[1])),
    A.THRESHOLD_RELU: lambda p: scaled(lambda x, out: np.greater(x, p[0], out=out)),
    A.SHRINK: lambda p: scaled(lambda x, out: outside(x, out, p[0])),
}

CLIPS: dict[int, Callable[[Params], tuple[float, float]]] = {    # the open interval a clip passes x through
    A.RELU: lambda p: (0.0, math.inf),
    A.RELU6: lambda p: (0.0, 6.0),
    A.HARD_TANH: lambda p: (p[2], p[3]),
}


@register("ActivationGrad", DataType.FLOAT32)
class ActivationGradKernel(Kernel):
    """inputs: dy, x (the forward input, same shape) -> dx = dy * f'(x)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        a = self.attrs
        if a.type not in GRADIENTS:
            raise self.error(f"activation type {a.type} has no gradient", NotSupportedError)
        if dy.shape != x.shape:
            raise self.error(f"dy {list(dy.shape)} and x {list(x.shape)} differ in shape")
        params = (a.alpha, a.beta, a.min_val, a.max_val)
        self.gradient = GRADIENTS[a.type](params)
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.gradient(inputs[0], inputs[1], outputs[0])


@register("PReLUGrad", DataType.FLOAT32)
class PReLUGradKernel(Kernel):
    """inputs: dy, x, slope -> dx = dy where x >= 0 else dy * slope; dslope = dy * x where x < 0, summed over
    the axes the slope was broadcast along."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, slope = inputs[:3]
        if dy.shape != x.shape or tuple(np.broadcast_shapes(slope.shape, x.shape)) != x.shape:
            raise self.error(f"needs dy and x of one shape and a slope broadcasting to it, got "
                             f"{[list(t.shape) for t in (dy, x, slope)]}")
        self.axes = broadcast_axes(slope.shape, x.shape)
        return [TensorSpec(x.shape, dy.dtype), TensorSpec(slope.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x, slope = inputs[:3]
        negative = x < 0
        np.multiply(dy, np.where(negative, slope, 1), out=outputs[0])
        sum_to(dy * np.where(negative, x, 0), self.axes, outputs[1])
