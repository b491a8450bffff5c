"""Small ONNX graph builder behind the model zoo.

A :class:`Graph` collects opset-13 nodes and seeded initial weights; the layer helpers below (``conv_bn_act``,
``squeeze_excitation``, ``inverted_residual``, ``linear`` ...) emit the node patterns PyTorch's exporter produces for
the matching ``torch.nn`` modules, so builders read like the architecture. Names follow the exporter too: nodes are
``/layer1/layer1.0/conv1/Conv`` with outputs ``<node>_output_0``, initializers ``layer1.0.conv1.weight``.

Initialisation is deterministic in ``seed``: convolutions He-normal over fan_out (``out_channels / groups * k * k``),
linear layers Glorot-uniform, biases zero, BatchNorm gamma ~ U(0.8, 1.2) and beta ~ N(0, 0.1). BatchNorm running
statistics are those of a network that has seen data: while the graph is built, a seeded standard-normal probe
batch is pushed through it in numpy (float64, so the statistics hardly depend on BLAS rounding), and each
BatchNormalization gets running_mean = m + N(0, 0.1) * s and running_var = s^2 * U(0.5, 2), where m and s^2 are
its input's per-channel probe mean and variance. The statistics are thus far from trivial (BN folding is really
exercised) while activations stay unit-scaled at any depth, so the logits depend on the input rather than on
accumulated BN offsets.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import count

import numpy as np
import onnx
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
INPUT_NAME = "input"
OUTPUT_NAME = "logits"
PROBE_PIXELS = 131072  # probe batch = clip(PROBE_PIXELS // input_size^2, 2, PROBE_BATCH_MAX)
PROBE_BATCH_MAX = 64  # enough samples per channel for BatchNorms on 1x1 maps

Dim = int | str
Padding = int | tuple[int, int, int, int]   # one value for every side, or ONNX's (top, left, bottom, right)

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
class Tensor:
    """A value of the graph under construction: ONNX name, static shape (dim 0 may be symbolic) and, for feature
    maps, its ``probe`` value (the numpy forward pass of the probe batch, see the module docstring)."""

    name: str
    shape: tuple[Dim, ...]
    probe: np.ndarray | None = None

    @property
    def channels(self) -> int:
        return int(self.shape[1])

    def derive(self, name: str, probe: np.ndarray | None) -> Tensor:
        """The output ``name`` of a shape-preserving op, with probe value ``probe``."""
        return Tensor(name, self.shape, probe)


class Graph:
    """Accumulates nodes and initializers under a PyTorch-style module scope; ``seed`` drives weights and probe."""

    def __init__(self, seed: int) -> None:
        weight_seed, probe_seed = np.random.SeedSequence(seed).spawn(2)
        self.rng = np.random.default_rng(weight_seed)
        self._probe_rng = np.random.default_rng(probe_seed)
        self._nodes: list[onnx.NodeProto] = []
        self._initializers: list[onnx.TensorProto] = []
        self._scope: list[str] = []
        self._node_counts: Counter[str] = Counter()

    def input(self, batch: int | None, channels: int, size: int) -> Tensor:
        """The NCHW float32 graph input; ``batch=None`` makes the batch dimension symbolic ("N")."""
        if size < 1 or channels < 1 or (batch is not None and batch < 1):
            raise ValueError(f"invalid input geometry: batch={batch}, channels={channels}, size={size}")
        probe_batch = int(np.clip(PROBE_PIXELS // size**2, 2, PROBE_BATCH_MAX))
        probe = self._probe_rng.standard_normal((probe_batch, channels, size, size))
        return Tensor(INPUT_NAME, ("N" if batch is None else batch, channels, size, size), probe)

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


def make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's ``_make_divisible``: round to a multiple of ``divisor``, never below 90 % of ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _sides(padding: Padding) -> tuple[int, int, int, int]:
    return (padding,) * 4 if isinstance(padding, int) else tuple(padding)


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int, int, int]:
    """TensorFlow's "SAME" padding of a square map: output ceil(size / stride), the odd pixel at the end."""
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return (total // 2, total // 2, total - total // 2, total - total // 2)


def _window_out(size: Dim, kernel: int, stride: int, begin: int, end: int) -> int:
    out = (int(size) + begin + end - kernel) // stride + 1
    if out < 1:
        raise ValueError(f"input too small: a {kernel}x{kernel} window does not fit a {size}x{size} feature map")
    return out


def _windowed(
    x: Tensor, name: str, channels: int, kernel: int, stride: int, padding: Padding, probe: np.ndarray | None
) -> Tensor:
    """The output of a sliding-window op over ``x`` (its shape checked to be non-empty)."""
    top, left, bottom, right = _sides(padding)
    spatial = (_window_out(x.shape[2], kernel, stride, top, bottom), _window_out(x.shape[3], kernel, stride, left, right))
    shape = (x.shape[0], channels, *spatial)
    return Tensor(name, shape, probe)


# ---------------------------------------------------------------- numpy forward of the probe batch


def _windows(x: np.ndarray, kernel: int, stride: int, padding: Padding, fill: float = 0.0) -> np.ndarray:
    """[N, C, OH, OW, k, k] view of the (padded) sliding windows of ``x``."""
    top, left, bottom, right = _sides(padding)
    pad = ((0, 0), (0, 0), (top, bottom), (left, right))
    x = np.pad(x, pad, constant_values=fill)
    return sliding_window_view(x, (kernel, kernel), axis=(2, 3))[:, :, ::stride, ::stride]


def _conv_np(x: np.ndarray, weight: np.ndarray, stride: int, padding: Padding, groups: int) -> np.ndarray:
    out_channels, group_in, kernel, _ = weight.shape
    win = _windows(x, kernel, stride, padding)
    n, c, oh, ow = win.shape[:4]
    if group_in == 1 and groups == c == out_channels:
        return np.einsum("nchwkl,ckl->nchw", win, weight[:, 0])
    cols = win.reshape(n, groups, group_in, oh, ow, kernel, kernel).transpose(1, 0, 3, 4, 2, 5, 6)
    cols = cols.reshape(groups, n * oh * ow, group_in * kernel * kernel)
    out = cols @ weight.reshape(groups, out_channels // groups, -1).transpose(0, 2, 1)
    return out.reshape(groups, n, oh, ow, -1).transpose(1, 0, 4, 2, 3).reshape(n, out_channels, oh, ow)


# ---------------------------------------------------------------- layers (one torch.nn module each)


def conv(
    g: Graph,
    x: Tensor,
    channels: int,
    kernel: int,
    stride: int = 1,
    padding: Padding | None = None,
    groups: int = 1,
    bias: bool = False,
    name: str = "conv",
) -> Tensor:
    """``nn.Conv2d`` with a square kernel; padding defaults to ``(kernel - 1) // 2`` ("same" at stride 1), and
    may differ per side (TensorFlow's "SAME", see `same_padding`)."""
    padding = (kernel - 1) // 2 if padding is None else padding
    fan_out = channels // groups * kernel * kernel
    shape = (channels, x.channels // groups, kernel, kernel)
    weight = g.rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_out))
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
            pads=list(_sides(padding)),
            strides=[stride, stride],
        )
    probe = None if x.probe is None else _conv_np(x.probe, weight, stride, padding, groups)
    return _windowed(x, out, channels, kernel, stride, padding, probe)


def batch_norm(g: Graph, x: Tensor, name: str = "bn", eps: float = 1e-5, momentum: float = 0.1) -> Tensor:
    """``nn.BatchNorm2d`` (``momentum`` in PyTorch's convention); running statistics are the probe statistics of
    ``x`` perturbed (see the module docstring), so ``x`` must carry a probe."""
    if x.probe is None:
        raise ValueError(f"batch_norm after {x.name} needs a probed input")
    c, rng = x.channels, g.rng
    gamma, beta = rng.uniform(0.8, 1.2, c), rng.normal(0.0, 0.1, c)
    var = x.probe.var(axis=(0, 2, 3), dtype=np.float64)
    var = np.maximum(var, 1e-3 * var.mean())
    mean = x.probe.mean(axis=(0, 2, 3), dtype=np.float64) + rng.normal(0.0, 0.1, c) * np.sqrt(var)
    var = var * rng.uniform(0.5, 2.0, c)
    with g.scope(name):
        inputs = [x.name, g.param("weight", gamma), g.param("bias", beta)]
        inputs += [g.param("running_mean", mean), g.param("running_var", var)]
        out = g.op("BatchNormalization", inputs, epsilon=eps, momentum=1.0 - momentum)
    scale = gamma / np.sqrt(var + eps)
    shift = beta - scale * mean
    probe = x.probe * scale[:, None, None] + shift[:, None, None]
    return x.derive(out, probe)


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
            hard = kind.startswith("hard")
            gate = g.op("HardSigmoid", [x.name], alpha=1.0 / 6.0) if hard else g.op("Sigmoid", [x.name])
            out = g.op("Mul", [x.name, gate]) if kind in ("hardswish", "silu") else gate
    return x.derive(out, None if x.probe is None else ACTIVATIONS[kind](x.probe))


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
    """``nn.MaxPool2d`` (floor mode)."""
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
    probe = None if x.probe is None else _windows(x.probe, kernel, stride, padding, -np.inf).max(axis=(4, 5))
    return _windowed(x, out, x.channels, kernel, stride, padding, probe)


def avg_pool(g: Graph, x: Tensor, kernel: int, stride: int, name: str = "avgpool") -> Tensor:
    """``nn.AvgPool2d`` without padding (floor mode)."""
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
    probe = None if x.probe is None else _windows(x.probe, kernel, stride, 0).mean(axis=(4, 5))
    return _windowed(x, out, x.channels, kernel, stride, 0, probe)


def global_avg_pool(g: Graph, x: Tensor, name: str = "avgpool") -> Tensor:
    """``nn.AdaptiveAvgPool2d(1)``."""
    with g.scope(name):
        out = g.op("GlobalAveragePool", [x.name])
    probe = None if x.probe is None else x.probe.mean(axis=(2, 3), keepdims=True)
    return Tensor(out, (*x.shape[:2], 1, 1), probe)


def flatten(g: Graph, x: Tensor) -> Tensor:
    """``torch.flatten(x, 1)`` (the probe stops here: no BatchNorm follows the classifier input)."""
    return Tensor(g.op("Flatten", [x.name], axis=1), (x.shape[0], int(np.prod(x.shape[1:]))))


def add(g: Graph, a: Tensor, b: Tensor) -> Tensor:
    """Residual sum ``a + b``."""
    return a.derive(g.op("Add", [a.name, b.name]), None if a.probe is None else a.probe + b.probe)


def dropout(g: Graph, x: Tensor, ratio: float, name: str) -> Tensor:
    """``nn.Dropout`` (identity at inference; ratio passed as a Constant input)."""
    with g.scope(name):
        return x.derive(g.op("Dropout", [x.name, g.constant(ratio)]), x.probe)


def local_response_norm(g: Graph, x: Tensor, size: int, alpha: float, beta: float, k: float, name: str) -> Tensor:
    """``nn.LocalResponseNorm`` as an ONNX LRN node (the probe stops here: only BN-free AlexNet uses it)."""
    with g.scope(name):
        return x.derive(g.op("LRN", [x.name], alpha=alpha, beta=beta, bias=k, size=size), None)


def linear(g: Graph, x: Tensor, features: int, name: str) -> Tensor:
    """``nn.Linear`` as Gemm(transB=1), Glorot-uniform weight, zero bias."""
    fan_in = int(x.shape[1])
    limit = np.float32(np.sqrt(6.0 / (fan_in + features)))
    weight = (2.0 * g.rng.random((features, fan_in), dtype=np.float32) - 1.0) * limit
    with g.scope(name):
        weight = g.param("weight", weight)
        out = g.op("Gemm", [x.name, weight, g.param("bias", np.zeros(features))], alpha=1.0, beta=1.0, transB=1)
    return Tensor(out, (x.shape[0], features))


# ---------------------------------------------------------------- composite blocks


def squeeze_excitation(g: Graph, x: Tensor, squeeze: int, act: str, gate: str, name: str) -> Tensor:
    """torchvision ``SqueezeExcitation``: pool -> 1x1 conv -> act -> 1x1 conv -> gate -> gate * x."""
    with g.scope(name):
        s = global_avg_pool(g, x, "avgpool")
        s = activation(g, conv(g, s, squeeze, 1, bias=True, name="fc1"), act, "activation")
        s = activation(g, conv(g, s, x.channels, 1, bias=True, name="fc2"), gate, "scale_activation")
        return x.derive(g.op("Mul", [s.name, x.name]), None if x.probe is None else s.probe * x.probe)


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
