"""Small ONNX graph builder behind the model zoo.

A :class:`Graph` collects opset-13 nodes and seeded initial weights; the layer helpers below (``conv_bn_act``,
``squeeze_excitation``, ``inverted_residual``, ``linear`` ...) emit the node patterns PyTorch's exporter produces for
the matching ``torch.nn`` modules, so builders read like the architecture. Names follow the exporter too: nodes are
``/layer1/layer1.0/conv1/Conv`` with outputs ``<node>_output_0``, initializers ``layer1.0.conv1.weight``.

Initialisation (all drawn from ``numpy.random.default_rng(seed)`` in construction order): convolutions He-normal
over fan_out (``out_channels / groups * k * k``), linear layers Glorot-uniform, biases zero, BatchNorm
gamma ~ U(0.8, 1.2) and beta ~ N(0, 0.1). BatchNorm running statistics are those of a network that has seen data:
every value carries an analytic estimate of its per-channel mean and variance for a standard-normal input
(:class:`Stats`, propagated exactly through convolutions including border effects and by Gauss-Hermite quadrature
through activations), and each BatchNormalization gets running_mean = mean + N(0, 0.1) * std and
running_var = var * U(0.5, 2). The statistics are therefore far from trivial (BN folding is really exercised) while
activations stay unit-scaled at any depth, so the logits depend on the input instead of on accumulated biases.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
INPUT_NAME = "input"
OUTPUT_NAME = "logits"

Dim = int | str

# Probabilists' Gauss-Hermite rule: E[f(Z)], Z ~ N(0, 1), is approximately f(_NODES) @ _WEIGHTS.
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(96)
_WEIGHTS = _WEIGHTS / np.sqrt(2.0 * np.pi)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _hardsigmoid(z: np.ndarray) -> np.ndarray:
    return np.clip(z / 6.0 + 0.5, 0.0, 1.0)


ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "relu": lambda z: np.maximum(z, 0.0),
    "relu6": lambda z: np.clip(z, 0.0, 6.0),
    "hardsigmoid": _hardsigmoid,
    "hardswish": lambda z: z * _hardsigmoid(z),
    "sigmoid": _sigmoid,
    "silu": lambda z: z * _sigmoid(z),
}


@dataclass(frozen=True)
class Stats:
    """Estimated per-channel mean and variance of a value, over samples and positions, for standard-normal input."""

    mean: np.ndarray
    var: np.ndarray

    def through(self, fn: Callable[[np.ndarray], np.ndarray]) -> Stats:
        """Statistics of ``fn(v)``, treating each channel of ``v`` as Gaussian (Gauss-Hermite quadrature)."""
        y = fn(self.mean[:, None] + np.sqrt(self.var)[:, None] * _NODES)
        mean = y @ _WEIGHTS
        return Stats(mean, np.maximum(y * y @ _WEIGHTS - mean * mean, 0.0))

    def __add__(self, other: Stats) -> Stats:
        return Stats(self.mean + other.mean, self.var + other.var)

    def __mul__(self, other: Stats) -> Stats:
        mean = self.mean * other.mean
        return Stats(mean, (self.var + self.mean**2) * (other.var + other.mean**2) - mean**2)


@dataclass(frozen=True)
class Tensor:
    """A value of the graph under construction: ONNX name, static shape (dim 0 may be symbolic) and, for feature
    maps, its estimated :class:`Stats`."""

    name: str
    shape: tuple[Dim, ...]
    stats: Stats | None = None

    @property
    def channels(self) -> int:
        return int(self.shape[1])

    def derive(self, name: str, stats: Stats | None) -> Tensor:
        """The output ``name`` of a shape-preserving op, with statistics ``stats``."""
        return Tensor(name, self.shape, stats)


class Graph:
    """Accumulates nodes and initializers under a PyTorch-style module scope; ``seed`` drives all weights."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self._nodes: list[onnx.NodeProto] = []
        self._initializers: list[onnx.TensorProto] = []
        self._scope: list[str] = []
        self._node_counts: Counter[str] = Counter()

    @contextmanager
    def scope(self, name: str | int) -> Iterator[None]:
        """Enter a child module called ``name`` (a Sequential index or an attribute name)."""
        self._scope.append(str(name))
        try:
            yield
        finally:
            self._scope.pop()

    def param(self, name: str, value: np.ndarray) -> str:
        """Add a float32 initializer ``<scope>.<name>`` and return its name."""
        full = ".".join([*self._scope, name])
        self._initializers.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), full))
        return full

    def op(self, op_type: str, inputs: Sequence[str], **attrs: object) -> str:
        """Append one single-output node in the current scope and return its output name."""
        base = f"{self._node_path()}/{op_type}"
        index = self._node_counts[base]
        self._node_counts[base] += 1
        name = base if index == 0 else f"{base}_{index}"
        output = f"{name}_output_0"
        self._nodes.append(helper.make_node(op_type, list(inputs), [output], name=name, **attrs))
        return output

    def constant(self, value: float) -> str:
        """A float32 scalar ``Constant`` node (how the exporter passes Clip bounds or a Dropout ratio)."""
        return self.op("Constant", [], value=numpy_helper.from_array(np.array(value, dtype=np.float32)))

    def model(self, x: Tensor, logits: Tensor, name: str) -> onnx.ModelProto:
        """Finish the graph: input ``x``, output ``logits`` renamed to ``"logits"``."""
        for node in self._nodes:
            node.output[:] = [OUTPUT_NAME if out == logits.name else out for out in node.output]
        graph = helper.make_graph(
            self._nodes,
            name,
            [helper.make_tensor_value_info(x.name, TensorProto.FLOAT, x.shape)],
            [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, logits.shape)],
            initializer=self._initializers,
        )
        return helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            ir_version=IR_VERSION,
            producer_name="mslite-py models",
        )

    def _node_path(self) -> str:
        parts: list[str] = []
        for name in self._scope:
            parts.append(f"{parts[-1]}.{name}" if name.isdigit() and parts else name)
        return "".join(f"/{p}" for p in parts)


def graph_input(batch: int | None, channels: int, size: int) -> Tensor:
    """The NCHW float32 graph input; ``batch=None`` makes the batch dimension symbolic ("N")."""
    if size < 1 or channels < 1 or (batch is not None and batch < 1):
        raise ValueError(f"invalid input geometry: batch={batch}, channels={channels}, size={size}")
    shape = ("N" if batch is None else batch, channels, size, size)
    return Tensor(INPUT_NAME, shape, Stats(np.zeros(channels), np.ones(channels)))


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: round to a multiple of ``divisor``, never below 90 % of ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _window_out(size: Dim, kernel: int, stride: int, padding: int) -> int:
    out = (int(size) + 2 * padding - kernel) // stride + 1
    if out < 1:
        raise ValueError(f"input too small: a {kernel}x{kernel} window does not fit a {size}x{size} feature map")
    return out


def _windowed(x: Tensor, name: str, channels: int, kernel: int, stride: int, padding: int, stats: Stats | None) -> Tensor:
    shape = (x.shape[0], channels, *(_window_out(s, kernel, stride, padding) for s in x.shape[2:]))
    return Tensor(name, shape, stats)


def _valid_taps(size: Dim, kernel: int, stride: int, padding: int) -> np.ndarray:
    """[out, kernel] mask: whether kernel tap t of output position i reads the input rather than the padding."""
    index = np.arange(_window_out(size, kernel, stride, padding))[:, None] * stride - padding + np.arange(kernel)
    return ((index >= 0) & (index < int(size))).astype(np.float64)


def _conv_stats(x: Stats, weight: np.ndarray, groups: int, valid_h: np.ndarray, valid_w: np.ndarray) -> Stats:
    """Per-channel mean/variance of a convolution (no bias) averaged over output positions; channels of the input
    are treated as independent, the spatial variation of the mean (zero padding at borders) is included."""
    out_channels, group_in = weight.shape[:2]
    source = (np.arange(out_channels) // (out_channels // groups))[:, None] * group_in + np.arange(group_in)
    mean_taps = np.einsum("oikl,oi->okl", weight, x.mean[source])
    var_taps = np.einsum("oikl,oi->okl", weight**2, x.var[source])
    mean_map = np.einsum("okl,ik,jl->oij", mean_taps, valid_h, valid_w)
    noise = np.einsum("okl,k,l->o", var_taps, valid_h.mean(0), valid_w.mean(0))
    return Stats(mean_map.mean((1, 2)), noise + mean_map.var((1, 2)))


# ---------------------------------------------------------------- layers (one torch.nn module each)


def conv(
    g: Graph,
    x: Tensor,
    channels: int,
    kernel: int,
    stride: int = 1,
    padding: int | None = None,
    groups: int = 1,
    bias: bool = False,
    name: str = "conv",
) -> Tensor:
    """``nn.Conv2d`` with a square kernel; padding defaults to ``(kernel - 1) // 2`` ("same" at stride 1)."""
    padding = (kernel - 1) // 2 if padding is None else padding
    fan_out = channels // groups * kernel * kernel
    weight = g.rng.normal(0.0, np.sqrt(2.0 / fan_out), (channels, x.channels // groups, kernel, kernel))
    with g.scope(name):
        inputs = [x.name, g.param("weight", weight)]
        if bias:
            inputs.append(g.param("bias", np.zeros(channels)))
        out = g.op(
            "Conv",
            inputs,
            dilations=[1, 1],
            group=groups,
            kernel_shape=[kernel, kernel],
            pads=[padding] * 4,
            strides=[stride, stride],
        )
    stats = None
    if x.stats is not None:
        valid = [_valid_taps(size, kernel, stride, padding) for size in x.shape[2:]]
        stats = _conv_stats(x.stats, weight, groups, *valid)
    return _windowed(x, out, channels, kernel, stride, padding, stats)


def batch_norm(g: Graph, x: Tensor, name: str = "bn", eps: float = 1e-5, momentum: float = 0.1) -> Tensor:
    """``nn.BatchNorm2d`` (``momentum`` in PyTorch's convention); running statistics are the estimated input
    statistics perturbed (mean + N(0, 0.1) * std, var * U(0.5, 2)), see the module docstring."""
    c, rng, stats = x.channels, g.rng, x.stats
    gamma, beta = rng.uniform(0.8, 1.2, c), rng.normal(0.0, 0.1, c)
    var = np.maximum(stats.var, 1e-3 * stats.var.mean())
    mean = stats.mean + rng.normal(0.0, 0.1, c) * np.sqrt(var)
    var = var * rng.uniform(0.5, 2.0, c)
    with g.scope(name):
        inputs = [x.name, g.param("weight", gamma), g.param("bias", beta)]
        inputs += [g.param("running_mean", mean), g.param("running_var", var)]
        out = g.op("BatchNormalization", inputs, epsilon=eps, momentum=1.0 - momentum)
    scale = gamma / np.sqrt(var + eps)
    return x.derive(out, Stats(scale * (stats.mean - mean) + beta, scale**2 * stats.var))


def activation(g: Graph, x: Tensor, kind: str, name: str) -> Tensor:
    """One activation module: relu, relu6 (Clip), hardsigmoid, hardswish (x * HardSigmoid), sigmoid, silu
    (x * Sigmoid), emitted as PyTorch exports them at opset 13."""
    if kind not in ACTIVATIONS:
        raise ValueError(f"unknown activation {kind!r}; expected one of {', '.join(ACTIVATIONS)}")
    with g.scope(name):
        if kind == "relu":
            out = g.op("Relu", [x.name])
        elif kind == "relu6":
            out = g.op("Clip", [x.name, g.constant(0.0), g.constant(6.0)])
        else:
            gate = g.op("HardSigmoid", [x.name], alpha=1.0 / 6.0) if kind.startswith("hard") else g.op("Sigmoid", [x.name])
            out = g.op("Mul", [x.name, gate]) if kind in ("hardswish", "silu") else gate
    return x.derive(out, None if x.stats is None else x.stats.through(ACTIVATIONS[kind]))


def conv_bn_act(
    g: Graph,
    x: Tensor,
    channels: int,
    kernel: int,
    stride: int = 1,
    groups: int = 1,
    act: str | None = "relu",
    bn_eps: float = 1e-5,
    bn_momentum: float = 0.1,
) -> Tensor:
    """torchvision ``Conv2dNormActivation`` (children ``0`` conv, ``1`` BN, ``2`` activation unless ``act`` is None)."""
    y = conv(g, x, channels, kernel, stride, groups=groups, name="0")
    y = batch_norm(g, y, "1", bn_eps, bn_momentum)
    return y if act is None else activation(g, y, act, "2")


def max_pool(g: Graph, x: Tensor, kernel: int, stride: int, padding: int = 0, name: str = "maxpool") -> Tensor:
    """``nn.MaxPool2d`` (floor mode); the statistics estimate passes through unchanged."""
    with g.scope(name):
        out = g.op(
            "MaxPool",
            [x.name],
            ceil_mode=0,
            dilations=[1, 1],
            kernel_shape=[kernel, kernel],
            pads=[padding] * 4,
            strides=[stride, stride],
        )
    return _windowed(x, out, x.channels, kernel, stride, padding, x.stats)


def avg_pool(g: Graph, x: Tensor, kernel: int, stride: int, name: str = "avgpool") -> Tensor:
    """``nn.AvgPool2d`` without padding (floor mode); the statistics estimate passes through unchanged."""
    with g.scope(name):
        out = g.op(
            "AveragePool",
            [x.name],
            ceil_mode=0,
            count_include_pad=1,
            kernel_shape=[kernel, kernel],
            pads=[0] * 4,
            strides=[stride, stride],
        )
    return _windowed(x, out, x.channels, kernel, stride, 0, x.stats)


def global_avg_pool(g: Graph, x: Tensor, name: str = "avgpool") -> Tensor:
    """``nn.AdaptiveAvgPool2d(1)``; variance estimated as for independent positions."""
    with g.scope(name):
        out = g.op("GlobalAveragePool", [x.name])
    area = int(np.prod(x.shape[2:]))
    stats = None if x.stats is None else Stats(x.stats.mean, x.stats.var / area)
    return Tensor(out, (*x.shape[:2], 1, 1), stats)


def flatten(g: Graph, x: Tensor) -> Tensor:
    """``torch.flatten(x, 1)``."""
    return Tensor(g.op("Flatten", [x.name], axis=1), (x.shape[0], int(np.prod(x.shape[1:]))))


def add(g: Graph, a: Tensor, b: Tensor) -> Tensor:
    """Residual sum ``a + b`` (branches treated as independent)."""
    return a.derive(g.op("Add", [a.name, b.name]), a.stats + b.stats)


def dropout(g: Graph, x: Tensor, ratio: float, name: str) -> Tensor:
    """``nn.Dropout`` (identity at inference; ratio passed as a Constant input)."""
    with g.scope(name):
        return x.derive(g.op("Dropout", [x.name, g.constant(ratio)]), x.stats)


def local_response_norm(g: Graph, x: Tensor, size: int, alpha: float, beta: float, k: float, name: str) -> Tensor:
    """``nn.LocalResponseNorm`` as an ONNX LRN node (no statistics estimate: used only in BN-free AlexNet)."""
    with g.scope(name):
        return x.derive(g.op("LRN", [x.name], alpha=alpha, beta=beta, bias=k, size=size), None)


def linear(g: Graph, x: Tensor, features: int, name: str) -> Tensor:
    """``nn.Linear`` as Gemm(transB=1), Glorot-uniform weight, zero bias."""
    fan_in = int(x.shape[1])
    limit = np.sqrt(6.0 / (fan_in + features))
    with g.scope(name):
        weight = g.param("weight", g.rng.uniform(-limit, limit, (features, fan_in)))
        out = g.op("Gemm", [x.name, weight, g.param("bias", np.zeros(features))], alpha=1.0, beta=1.0, transB=1)
    return Tensor(out, (x.shape[0], features))


# ---------------------------------------------------------------- composite blocks


def squeeze_excitation(g: Graph, x: Tensor, squeeze: int, act: str, gate: str, name: str) -> Tensor:
    """torchvision ``SqueezeExcitation``: pool -> 1x1 conv -> act -> 1x1 conv -> gate -> gate * x."""
    with g.scope(name):
        s = global_avg_pool(g, x, "avgpool")
        s = activation(g, conv(g, s, squeeze, 1, bias=True, name="fc1"), act, "activation")
        s = activation(g, conv(g, s, x.channels, 1, bias=True, name="fc2"), gate, "scale_activation")
        return x.derive(g.op("Mul", [s.name, x.name]), s.stats * x.stats)


@dataclass(frozen=True)
class SqueezeExcite:
    """Squeeze-and-excitation settings of an inverted residual block."""

    channels: int
    act: str
    gate: str


def inverted_residual(
    g: Graph,
    x: Tensor,
    expanded: int,
    out: int,
    kernel: int,
    stride: int,
    act: str,
    se: SqueezeExcite | None = None,
    body: str = "block",
    bn_eps: float = 1e-5,
    bn_momentum: float = 0.1,
) -> Tensor:
    """MobileNetV2/V3 and EfficientNet MBConv block: [1x1 expand] -> depthwise -> [SE] -> 1x1 linear projection,
    plus the identity when stride is 1 and channels are kept. Layers are children ``0, 1, ...`` of ``body``."""
    bn = {"bn_eps": bn_eps, "bn_momentum": bn_momentum}
    index = count()
    y = x
    with g.scope(body):
        if expanded != x.channels:
            with g.scope(next(index)):
                y = conv_bn_act(g, y, expanded, 1, act=act, **bn)
        with g.scope(next(index)):
            y = conv_bn_act(g, y, expanded, kernel, stride, groups=expanded, act=act, **bn)
        if se is not None:
            y = squeeze_excitation(g, y, se.channels, se.act, se.gate, str(next(index)))
        with g.scope(next(index)):
            y = conv_bn_act(g, y, out, 1, act=None, **bn)
    return add(g, y, x) if stride == 1 and out == x.channels else y
