"""Independent PyTorch executor for ONNX graphs: ``to_torch(model)`` returns an eager ``nn.Module``.

Float initializers become ``nn.Parameter`` s (BatchNormalization running mean/variance become buffers), so the
module can be trained or differentiated; ``module.train()`` switches BatchNormalization to batch statistics (and
updates the running ones, as PyTorch does) and enables Dropout. Parameters and buffers live under sanitized keys;
``module.onnx_names`` maps each key back to its ONNX initializer name and ``module.onnx_parameters()`` returns the
parameters keyed by ONNX name. Shape subgraphs (Shape/Gather/Slice/Concat/Cast/...) are evaluated in torch on
every call. It is the PyTorch side of the training and zoo tests and of the benches (``bench/``): an executor
written apart from ``lite``, so agreeing with it means something.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper
from torch import Tensor, nn

Inputs = list[Tensor | None]
Attrs = dict[str, object]
Op = Callable[[Inputs, Attrs, bool], Tensor | tuple[Tensor, ...]]


class _Node(NamedTuple):
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs


def _attrs(node: onnx.NodeProto) -> Attrs:
    values = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return {k: numpy_helper.to_array(v).copy() if isinstance(v, onnx.TensorProto) else v for k, v in values.items()}


def _torch_dtype(onnx_type: int) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=helper.tensor_dtype_to_np_dtype(onnx_type))).dtype


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _ints(t: Tensor | None) -> list[int] | None:
    return None if t is None else [int(v) for v in t.reshape(-1).tolist()]


# ---------------------------------------------------------------- padding helpers


def _explicit_pads(
    a: Attrs, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> list[int]:
    """ONNX pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...], resolving ``auto_pad``."""
    auto = _text(a.get("auto_pad", b"NOTSET"))
    n = len(kernel)
    if auto == "VALID":
        return [0] * 2 * n
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        total = [
            max((-(-s // st) - 1) * st + (k - 1) * d + 1 - s, 0)
            for s, k, st, d in zip(spatial, kernel, strides, dilations)
        ]
        small = [t // 2 for t in total]
        large = [t - h for t, h in zip(total, small)]
        return small + large if auto == "SAME_UPPER" else large + small
    return list(a.get("pads", [0] * 2 * n))


def _torch_pad(pads: Sequence[int]) -> list[int]:
    """ONNX begin/end pads (all axes) -> F.pad order (last axis first), trailing no-op pairs dropped."""
    n = len(pads) // 2
    pairs = [(pads[i], pads[i + n]) for i in reversed(range(n))]
    while pairs and pairs[-1] == (0, 0):
        pairs.pop()
    return [p for pair in pairs for p in pair]


def _nc_pads(pads: Sequence[int]) -> list[int]:
    """Spatial ONNX pads -> pads over all axes of an N, C, spatial... tensor (none on N and C)."""
    n = len(pads) // 2
    return [0, 0, *pads[:n], 0, 0, *pads[n:]]


def _window_padding(x: Tensor, pads: list[int], limit: Sequence[int] | None, value: float) -> tuple[Tensor, list[int]]:
    """Symmetric pads (within ``limit`` per axis, if any) go to the torch op; otherwise ``x`` is padded here."""
    n = len(pads) // 2
    begin, end = pads[:n], pads[n:]
    if begin == end and (limit is None or all(p <= m for p, m in zip(begin, limit))):
        return x, begin
    return F.pad(x, _torch_pad(_nc_pads(pads)), value=value), [0] * n


# ---------------------------------------------------------------- operators

_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_MAX_POOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVG_POOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _conv(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, w, b = (ins + [None])[:3]
    n = w.dim() - 2
    strides, dilations = a.get("strides", [1] * n), a.get("dilations", [1] * n)
    pads = _explicit_pads(a, x.shape[2:], w.shape[2:], strides, dilations)
    x, padding = _window_padding(x, pads, None, 0.0)
    return _CONV[n](x, w, b, strides, padding, dilations, a.get("group", 1))


def _pool_geometry(x: Tensor, a: Attrs) -> tuple[list[int], list[int], list[int], list[int]]:
    kernel = list(a["kernel_shape"])
    strides, dilations = a.get("strides", [1] * len(kernel)), a.get("dilations", [1] * len(kernel))
    return kernel, strides, dilations, _explicit_pads(a, x.shape[2:], kernel, strides, dilations)


def _max_pool(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x = ins[0]
    kernel, strides, dilations, pads = _pool_geometry(x, a)
    x, padding = _window_padding(x, pads, [k // 2 for k in kernel], float("-inf"))
    return _MAX_POOL[len(kernel)](x, kernel, strides, padding, dilations, bool(a.get("ceil_mode", 0)))


def _avg_pool(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x = ins[0]
    kernel, strides, _, pads = _pool_geometry(x, a)
    ceil_mode = bool(a.get("ceil_mode", 0))
    pool = functools.partial(_AVG_POOL[len(kernel)], kernel_size=kernel, stride=strides, ceil_mode=ceil_mode)
    include_pad = bool(a.get("count_include_pad", 0))
    padded, padding = _window_padding(x, pads, [k // 2 for k in kernel], 0.0)
    if padded is x:
        return pool(x, padding=padding, count_include_pad=include_pad)
    if include_pad:
        return pool(padded, padding=0)
    return pool(padded, padding=0) / pool(F.pad(torch.ones_like(x[:1, :1]), _torch_pad(_nc_pads(pads))), padding=0)


def _global_pool(reduce: Callable[..., Tensor]) -> Op:
    return lambda ins, a, training: reduce(ins[0], dim=tuple(range(2, ins[0].dim())), keepdim=True)


def _batch_norm(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, scale, bias, mean, var = ins
    momentum = 1.0 - a.get("momentum", 0.9)
    return F.batch_norm(x, mean, var, scale, bias, training, momentum, a.get("epsilon", 1e-5))


def _gemm(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, w, c = (ins + [None])[:3]
    x = x.t() if a.get("transA", 0) else x
    w = w.t() if a.get("transB", 0) else w
    y = x @ w
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    y = y if alpha == 1.0 else alpha * y
    return y if c is None else y + (c if beta == 1.0 else beta * c)


def _lrn(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    """ONNX LRN: x / (bias + alpha / size * square_sum)^beta, square_sum over channels
    [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] (F.local_response_norm centres even sizes otherwise)."""
    x, size = ins[0], a["size"]
    squares = F.pad(x.square().movedim(1, -1), ((size - 1) // 2, size // 2))
    window_sum = squares.unfold(-1, size, 1).sum(-1).movedim(-1, 1)
    return x / (a.get("bias", 1.0) + a.get("alpha", 1e-4) / size * window_sum) ** a.get("beta", 0.75)


def _dropout(ins: Inputs, a: Attrs, training: bool) -> tuple[Tensor, Tensor]:
    x = ins[0]
    ratio = float(ins[1]) if len(ins) > 1 and ins[1] is not None else a.get("ratio", 0.5)
    if not training or ratio == 0.0:
        return x, torch.ones_like(x, dtype=torch.bool)
    mask = torch.rand_like(x) >= ratio
    return x * mask / (1.0 - ratio), mask


def _clip(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, low, high = (ins + [None, None])[:3]
    if low is None and high is None:
        return x
    return x.clamp(None if low is None else low.item(), None if high is None else high.item())


def _hard_sigmoid(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    return (a.get("alpha", 0.2) * ins[0] + a.get("beta", 0.5)).clamp(0.0, 1.0)


def _flatten(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, axis = ins[0], a.get("axis", 1)
    axis = axis + x.dim() if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:])))


def _reshape(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, shape = ins[0], _ints(ins[1])
    if not a.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _transpose(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x = ins[0]
    return x.permute(a.get("perm", list(reversed(range(x.dim())))))


def _squeeze(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x = ins[0]
    axes = _ints(ins[1]) if len(ins) > 1 else a.get("axes")
    if axes is None:
        return x.squeeze()
    return x.squeeze(tuple(ax % x.dim() for ax in axes))


def _unsqueeze(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x = ins[0]
    axes = _ints(ins[1]) if len(ins) > 1 else a["axes"]
    rank = x.dim() + len(axes)
    for axis in sorted(ax % rank for ax in axes):
        x = x.unsqueeze(axis)
    return x


def _concat(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    return torch.cat(ins, dim=a["axis"])


def _shape(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    shape = list(ins[0].shape)
    return torch.tensor(shape[a.get("start", 0) : a.get("end", len(shape))], dtype=torch.int64)


def _gather(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, index = ins
    axis = a.get("axis", 0) % x.dim()
    index = torch.where(index < 0, index + x.shape[axis], index)
    out = x.index_select(axis, index.reshape(-1))
    return out.reshape(*x.shape[:axis], *index.shape, *x.shape[axis + 1 :])


def _slice(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, starts, ends = ins[0], _ints(ins[1]), _ints(ins[2])
    axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        kept = range(x.shape[axis])[slice(start, end, step)]
        x = x.index_select(axis, torch.tensor(kept, dtype=torch.int64, device=x.device))
    return x


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "edge": "replicate"}


def _pad(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, pads = ins[0], _ints(ins[1])
    value = float(ins[2]) if len(ins) > 2 and ins[2] is not None else 0.0
    if len(ins) > 3 and ins[3] is not None:
        axes, full = [ax % x.dim() for ax in _ints(ins[3])], [0] * 2 * x.dim()
        for i, axis in enumerate(axes):
            full[axis], full[axis + x.dim()] = pads[i], pads[i + len(axes)]
        pads = full
    mode = _PAD_MODES[_text(a.get("mode", b"constant"))]
    return F.pad(x, _torch_pad(pads), mode=mode, value=value if mode == "constant" else None)


def _constant_of_shape(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    value = a.get("value", np.zeros(1, dtype=np.float32))
    return torch.full(_ints(ins[0]), value.item(), dtype=torch.from_numpy(value).dtype)


def _cast(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    return ins[0].to(_torch_dtype(a["to"]))


def _div(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    x, y = ins
    return x / y if x.is_floating_point() else torch.div(x, y, rounding_mode="trunc")


def _softmax(ins: Inputs, a: Attrs, training: bool) -> Tensor:
    return F.softmax(ins[0], dim=a.get("axis", -1))


def _elementwise(fn: Callable[..., Tensor]) -> Op:
    return lambda ins, a, training: fn(*ins)


def _variadic(fn: Callable[[Tensor, Tensor], Tensor]) -> Op:
    return lambda ins, a, training: functools.reduce(fn, ins)


OPS: dict[str, Op] = {
    "Conv": _conv,
    "BatchNormalization": _batch_norm,
    "Gemm": _gemm,
    "MatMul": _elementwise(torch.matmul),
    "MaxPool": _max_pool,
    "AveragePool": _avg_pool,
    "GlobalAveragePool": _global_pool(torch.mean),
    "GlobalMaxPool": _global_pool(torch.amax),
    "LRN": _lrn,
    "Dropout": _dropout,
    "Relu": _elementwise(torch.relu),
    "Sigmoid": _elementwise(torch.sigmoid),
    "Tanh": _elementwise(torch.tanh),
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _elementwise(F.hardswish),
    "Clip": _clip,
    "Softmax": _softmax,
    "Identity": _elementwise(lambda x: x),
    "Neg": _elementwise(torch.neg),
    "Sqrt": _elementwise(torch.sqrt),
    "Exp": _elementwise(torch.exp),
    "Ceil": _elementwise(torch.ceil),
    "Floor": _elementwise(torch.floor),
    "Add": _elementwise(torch.add),
    "Sub": _elementwise(torch.sub),
    "Mul": _elementwise(torch.mul),
    "Div": _div,
    "Pow": _elementwise(torch.pow),
    "Max": _variadic(torch.maximum),
    "Min": _variadic(torch.minimum),
    "Sum": _variadic(torch.add),
    "Flatten": _flatten,
    "Reshape": _reshape,
    "Transpose": _transpose,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Concat": _concat,
    "Shape": _shape,
    "Gather": _gather,
    "Slice": _slice,
    "Pad": _pad,
    "ConstantOfShape": _constant_of_shape,
    "Cast": _cast,
}


# ---------------------------------------------------------------- the module


def _sanitize(name: str, taken: set[str]) -> str:
    key = re.sub(r"\W", "_", name) or "_"
    key = f"_{key}" if key[0].isdigit() else key
    unique, suffix = key, 1
    while unique in taken:
        unique, suffix = f"{key}_{suffix}", suffix + 1
    taken.add(unique)
    return unique


class OnnxModule(nn.Module):
    """Eager execution of an ONNX graph (default domain, no control flow); see the module docstring."""

    def __init__(self, model: onnx.ModelProto) -> None:
        super().__init__()
        graph = model.graph
        unsupported = sorted({n.op_type for n in graph.node if n.op_type not in OPS and n.op_type != "Constant"})
        if unsupported or any(n.domain not in ("", "ai.onnx") for n in graph.node):
            raise NotImplementedError(f"to_torch does not support: {', '.join(unsupported) or 'custom domains'}")
        self.params = nn.ParameterDict()
        self.constants = nn.Module()
        self.onnx_names: dict[str, str] = {}
        self._keys: dict[str, tuple[str, str]] = {}
        running_stats = {name for n in graph.node if n.op_type == "BatchNormalization" for name in n.input[3:5]}
        taken: set[str] = set()
        for init in graph.initializer:
            value = torch.from_numpy(numpy_helper.to_array(init).copy())
            trainable = value.is_floating_point() and init.name not in running_stats
            self._store(init.name, value, trainable, taken)
        for node in graph.node:
            if node.op_type == "Constant":
                self._store(node.output[0], torch.from_numpy(_constant_value(node).copy()), False, taken)
        initialized = {i.name for i in graph.initializer}
        self.input_names = [i.name for i in graph.input if i.name not in initialized]
        self.output_names = [o.name for o in graph.output]
        self._nodes = [
            _Node(n.op_type, tuple(n.input), tuple(n.output), _attrs(n)) for n in graph.node if n.op_type != "Constant"
        ]

    def _store(self, onnx_name: str, value: Tensor, trainable: bool, taken: set[str]) -> None:
        key = _sanitize(onnx_name, taken)
        self.onnx_names[key] = onnx_name
        if trainable:
            self.params[key] = nn.Parameter(value)
            self._keys[onnx_name] = ("params", key)
        else:
            self.constants.register_buffer(key, value)
            self._keys[onnx_name] = ("constants", key)

    def onnx_parameters(self) -> dict[str, nn.Parameter]:
        """The trainable parameters keyed by their ONNX initializer names."""
        return {self.onnx_names[key]: p for key, p in self.params.items()}

    def forward(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        """Run the graph on its inputs (in graph-input order); one output is returned bare, several as a tuple."""
        if len(inputs) != len(self.input_names):
            expected = ", ".join(self.input_names)
            raise TypeError(f"expected {len(self.input_names)} inputs ({expected}), got {len(inputs)}")
        env: dict[str, Tensor] = {name: getattr(getattr(self, owner), key) for name, (owner, key) in self._keys.items()}
        env.update(zip(self.input_names, inputs))
        for node in self._nodes:
            ins = [env[name] if name else None for name in node.inputs]
            outs = OPS[node.op_type](ins, node.attrs, self.training)
            outs = outs if isinstance(outs, tuple) else (outs,)
            env.update((name, value) for name, value in zip(node.outputs, outs) if name)
        results = tuple(env[name] for name in self.output_names)
        return results[0] if len(results) == 1 else results


def _constant_value(node: onnx.NodeProto) -> np.ndarray:
    attr = node.attribute[0]
    if attr.name == "value":
        return numpy_helper.to_array(attr.t)
    return np.asarray(helper.get_attribute_value(attr), dtype=np.float32 if "float" in attr.name else np.int64)


def to_torch(model: onnx.ModelProto) -> OnnxModule:
    """A PyTorch module computing ``model`` with its initializers as parameters (see the module docstring)."""
    return OnnxModule(model)
