"""MindSpore Lite's primitives -> the runtime's ops: one translation per official primitive.

The official graph is NHWC inside (as ours), so most primitives map one to one: the same kernel, attributes renamed.
Where MindSpore Lite passes an attribute as a const input tensor (Transpose's perm, Gather's axis) it becomes our
attribute; where it keeps a list attribute that our op takes as an input (Squeeze's axes) a const tensor is added.
A primitive without a translation, or an attribute value our kernel cannot honour, is refused naming the node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from lite.compiler import check_memory
from lite.dtypes import DataType, from_numpy
from lite.kernels.int8.requantize import NNACL
from lite.model import NodeDef, TensorDef
from lite.status import GraphFileError, NotSupportedError
from schema import attrs as op_attrs
from schema import fb as ours
from schema.mindspore_lite import fb

_PRIMITIVES = {code: name for name, code in vars(fb.PrimitiveType).items() if not name.startswith("_") and code}
_A, _OA = fb.ActivationType, ours.ActivationType
# Activations whose official and our numbers agree and that need no parameter: fusable into any op.
_PLAIN_ACTIVATIONS = {_A.NO_ACTIVATION, _A.RELU, _A.SIGMOID, _A.RELU6, _A.SOFTSIGN, _A.SOFTPLUS, _A.TANH,
                      _A.HSWISH, _A.SWISH}
_PAD_MODES = {fb.PadMode.PAD: ours.PadMode.PAD, fb.PadMode.SAME: ours.PadMode.SAME_UPPER,
              fb.PadMode.VALID: ours.PadMode.VALID}
_INT_TYPES = (DataType.INT32, DataType.INT64)
_END = np.iinfo(np.int64).max      # "to the end of the axis" in our Slice
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def primitive_name(code: int) -> str:
    """The official primitive's name for a PrimitiveType code (the verifier has already refused unknown codes)."""
    return _PRIMITIVES[code]


@dataclass
class Node:
    """One official CNode: its primitive's attribute table (flatc reader) and tensor indices."""
    name: str
    op: str
    table: Any
    inputs: list[int]
    outputs: list[int]

    def attr(self, field: str) -> Any:
        return getattr(self.table, field)()

    def ints(self, field: str) -> list[int]:
        """A [long] attribute as a list ([] when absent)."""
        return getattr(self.table, field + "AsNumpy")().tolist() if getattr(self.table, field + "Length")() else []

    def refuse(self, what: str) -> NotSupportedError:
        return NotSupportedError(f"{self.op} node '{self.name}': {what}")

    def fail(self, what: str) -> GraphFileError:
        return GraphFileError(f"{self.op} node '{self.name}': {what}")


def official_dequantized(t: TensorDef) -> np.ndarray:
    """A weight-quant tensor's float32 values as MindSpore Lite's weight decoder makes them: in double,
    `(q - zero_point) * scale`, per channel also `* var_corr + mean_corr` (the converter's correction of each
    channel's mean and spread; a var_corr outside [0, 10] counts as 1), then rounded to float32."""
    q = t.quant_params
    shape = [1] * t.data.ndim
    if len(q) > 1:
        shape[t.quant_axis] = -1

    def column(values: list[float]) -> np.ndarray:
        return np.array(values, np.float64).reshape(shape)
    real = (t.data - column([p.zeroPoint for p in q])) * column([p.scale for p in q])
    if len(q) > 1:
        real = real * column([p.varCorr if 0 <= p.varCorr <= 10 else 1 for p in q]) + column([p.meanCorr for p in q])
    return real.astype(np.float32)


class Graph:
    """The runtime graph being built: the file's tensors (plus const tensors translations add) and our nodes."""

    def __init__(self, tensors: list[TensorDef]):
        self.tensors, self.nodes = tensors, []
        self.files_tensors = len(tensors)
        self.dequantized: dict[int, int] = {}     # int weight -> the float tensor its QuantDTypeCast makes
        self.variables: set[int] = set()          # consts a training file updates: never copied at read time

    def check_index(self, index: int, where: str) -> int:
        if not 0 <= index < self.files_tensors:
            raise GraphFileError(f"{where} refers to tensor {index}, but the model has {self.files_tensors} tensors")
        return index

    def add(self, node: Node, op: str, attrs: dict[str, Any], inputs: list[int], outputs: list[int] | None = None,
            part: str = "") -> None:
        """Our `op` with `attrs`, named after the official node (+ `part` when one node becomes several);
        integers must fit our schema's 32 bits (the official file stores 64)."""
        for key, value in attrs.items():
            for v in value if isinstance(value, list) else [value]:
                if isinstance(v, (int, np.integer)) and not _INT32_MIN <= v <= _INT32_MAX:
                    raise node.fail(f"attribute {key} = {v} is out of range")
        self.nodes.append(NodeDef(node.name + part, op, op_attrs.build(op, attrs), inputs,
                                  node.outputs if outputs is None else outputs, rounding=NNACL))

    def add_tensor(self, name: str, data_type: int, data: np.ndarray | None = None) -> int:
        """A new tensor (const when `data` is given) and its index."""
        node_type = ours.NodeType.CNODE if data is None else ours.NodeType.VALUE
        dims = () if data is None else data.shape
        self.tensors.append(TensorDef(len(self.tensors), name, node_type, data_type, dims, ours.Format.ND, data))
        return len(self.tensors) - 1

    def add_const(self, name: str, values: np.ndarray) -> int:
        """A new const tensor of `values` and its index (a copy: within the memory limit, whatever the file says)."""
        check_memory(values.nbytes, f"const tensor '{name}'")
        data = np.ascontiguousarray(values)
        data.flags.writeable = False
        return self.add_tensor(name, from_numpy(data.dtype), data)

    def transposed(self, index: int) -> int:
        """A new const tensor: the 2-D const `index` transposed, with its quant params (channel axis swapped)."""
        t = self.tensors[index]
        new = self.add_tensor(f"{t.name}/transposed", t.data_type, np.ascontiguousarray(t.data.T))
        self.tensors[new].quant_params, self.tensors[new].quant_axis = t.quant_params, 1 - t.quant_axis
        return new

    def dequantize_weights(self, first: int, quant_type: int) -> None:
        """Nodes from `first` on read their integer weights as float32 consts decoded as the official runtime
        decodes them when it loads the file (`official_dequantized`)."""
        for nd in self.nodes[first:]:
            nd.quant_type = quant_type
            for k, i in enumerate(nd.inputs):
                t = self.tensors[i] if i >= 0 else None
                if t is not None and t.is_const and t.quant_params and t.data_type in (DataType.INT8, DataType.INT16):
                    if i not in self.dequantized:
                        self.dequantized[i] = self.add_const(f"{t.name}/dequant", official_dequantized(t))
                    nd.inputs[k] = self.dequantized[i]

    def int64_input(self, node: Node, position: int) -> int:
        """Input `position` of `node` as int64, which some of our ops require where MindSpore Lite uses int32: a
        converted copy of a const, a Cast of a computed tensor."""
        i = node.inputs[position]
        t = self.tensors[i]
        if t.data_type == DataType.INT64:
            return i
        if t.is_const:
            return self.add_const(f"{t.name}/int64", t.data.astype(np.int64))
        cast = self.add_tensor(f"{t.name}/int64", DataType.INT64)
        self.add_cast(f"{node.name}/{t.name}/int64", i, cast)
        return cast

    def add_cast(self, name: str, source: int, target: int) -> None:
        """A Cast of tensor `source` to the type of tensor `target`."""
        self.nodes.append(NodeDef(name, "Cast", op_attrs.build("Cast", {"to": self.tensors[target].data_type}),
                                  [source], [target]))

    def add_narrowing(self, node: Node, op: str, attrs: dict[str, Any], inputs: list[int],
                      int64_outputs: tuple[int, ...]) -> None:
        """Our `op`, whose outputs at `int64_outputs` are int64, each cast to the type the file declares."""
        outputs = list(node.outputs)
        casts = []
        for k in int64_outputs:
            if k < len(outputs) and self.tensors[outputs[k]].data_type != DataType.INT64:
                wide = self.add_tensor(f"{self.tensors[outputs[k]].name}/int64", DataType.INT64)
                casts.append((wide, outputs[k]))
                outputs[k] = wide
        self.add(node, op, attrs, inputs, outputs)
        for wide, declared in casts:
            self.add_cast(f"{node.name}/{self.tensors[declared].name}/cast", wide, declared)

    def const(self, node: Node, position: int, what: str, integer: bool = True) -> np.ndarray:
        """The values of the node's input `position`, which must be a const tensor (of ints when `integer`)."""
        if position >= len(node.inputs):
            raise node.fail(f"has {len(node.inputs)} inputs, its {what} (input {position}) is missing")
        t = self.tensors[node.inputs[position]]
        if not t.is_const:
            raise node.refuse(f"its {what} is computed at run time; only a const {what} is supported")
        if integer and t.data_type not in _INT_TYPES:
            raise node.fail(f"its {what} is not int32 or int64")
        return t.data


def register(op: str, rule: Callable[[Graph, Node], None], arity: tuple[int, int]) -> None:
    """Add the translation of official primitive `op` taking `arity` (fewest, most) inputs (`grad_ops`)."""
    _RULES[op], _ARITY[op] = rule, arity


def translate(graph: Graph, name: str, op: str, table: Any, inputs: list[int], outputs: list[int],
              quant_type: int) -> None:
    """Append the runtime nodes of one official node to `graph` (`quant_type`: ours, NONE or WEIGHT)."""
    node = Node(name, op, table, inputs, outputs)
    rule = _RULES.get(op)
    if rule is None:
        raise NotSupportedError(f"node '{name}': MindSpore Lite op {op} is not supported")
    arity = _ARITY.get(op)
    if arity is not None and not arity[0] <= len(inputs) <= arity[1]:
        raise node.fail(f"has {len(inputs)} inputs, expected {arity[0]} to {arity[1]}")
    if not outputs:
        raise node.fail("has no outputs")
    first = len(graph.nodes)
    rule(graph, node)
    if quant_type == ours.QuantType.WEIGHT:
        graph.dequantize_weights(first, quant_type)


def _fused(node: Node, field: str = "ActivationType") -> int:
    kind = node.attr(field)
    if kind not in _PLAIN_ACTIVATIONS:
        raise node.refuse(f"fused activation type {kind} is not supported")
    return kind


def _pair(node: Node, field: str, default: int) -> tuple[int, int]:
    values = node.ints(field) or [default, default]
    if len(values) != 2:
        raise node.fail(f"{field} has {len(values)} values, expected 2")
    return values[0], values[1]


def _pads(node: Node, field: str) -> dict[str, int]:
    pads = node.ints(field) or [0, 0, 0, 0]
    if len(pads) != 4 or min(pads) < 0:
        raise node.fail(f"{field} is {pads}, expected 4 non-negative values (top, bottom, left, right)")
    return dict(zip(("pad_top", "pad_bottom", "pad_left", "pad_right"), pads))


def _pad_mode(node: Node) -> int:
    mode = node.attr("PadMode")
    if mode not in _PAD_MODES:
        raise node.fail(f"unknown pad mode {mode}")
    return _PAD_MODES[mode]


def _nhwc(node: Node) -> None:
    if node.attr("Format") != fb.Format.NHWC:
        raise node.refuse(f"data format {node.attr('Format')} is not supported (only NHWC)")


def _conv(graph: Graph, node: Node) -> None:
    """Conv2DFusion: x NHWC, weight [out, kh, kw, in / group] (our OHWI), bias?; plain, grouped or depthwise."""
    _nhwc(node)
    kh, kw = _pair(node, "KernelSize", 0)
    sh, sw = _pair(node, "Stride", 1)
    dh, dw = _pair(node, "Dilation", 1)
    group = node.attr("Group") or 1
    graph.add(node, "Conv2D", dict(kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, dilation_h=dh,
                                   dilation_w=dw, pad_mode=_pad_mode(node), **_pads(node, "PadList"), group=group,
                                   in_channel=node.attr("InChannel"), out_channel=node.attr("OutChannel"),
                                   activation=_fused(node)), node.inputs)


def _conv_transpose(graph: Graph, node: Node) -> None:
    """Conv2dTransposeFusion: x NHWC, weight [in, kh, kw, out / group] (our IHWO), bias?; output padding as
    ONNX's."""
    _nhwc(node)
    kh, kw = _pair(node, "KernelSize", 0)
    sh, sw = _pair(node, "Stride", 1)
    dh, dw = _pair(node, "Dilation", 1)
    oh, ow = _pair(node, "OutputPaddings", 0)
    graph.add(node, "Conv2DTranspose", dict(kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, dilation_h=dh,
                                            dilation_w=dw, pad_mode=_pad_mode(node), **_pads(node, "PadList"),
                                            output_pad_h=oh, output_pad_w=ow, group=node.attr("Group") or 1,
                                            in_channel=node.attr("InChannel"), out_channel=node.attr("OutChannel"),
                                            activation=_fused(node)), node.inputs)


def _pool(mode: int) -> Callable[[Graph, Node], None]:
    def rule(graph: Graph, node: Node) -> None:
        """Max/AvgPoolFusion: NHWC; the average counts only the taps inside the input (MindSpore Lite's rule)."""
        _nhwc(node)
        glob = bool(node.attr("Global"))
        kh, kw = (0, 0) if glob else _pair(node, "KernelSize", 1)
        sh, sw = _pair(node, "Strides", 1)
        graph.add(node, "Pooling", dict(mode=mode, global_pool=glob, kernel_h=kh, kernel_w=kw, stride_h=sh,
                                        stride_w=sw, pad_mode=_pad_mode(node), **_pads(node, "Pad"),
                                        ceil_mode=node.attr("RoundMode") == fb.RoundMode.CEIL,
                                        count_include_pad=False, activation=_fused(node)), node.inputs[:1])
    return rule


def _arithmetic(op: str, fused: bool = True) -> Callable[[Graph, Node], None]:
    def rule(graph: Graph, node: Node) -> None:
        graph.add(node, op, {"activation": _fused(node)} if fused else {}, node.inputs)
    return rule


def _full_connection(graph: Graph, node: Node) -> None:
    """FullConnection: x, weight [out, in], bias?; contracts the last axis of x."""
    axis = node.attr("Axis")
    if node.attr("UseAxis") and axis not in (-1, len(graph.tensors[node.inputs[0]].dims) - 1):
        raise node.refuse(f"contracting from axis {axis} is not supported (only the last axis)")
    graph.add(node, "FullConnection", {"activation": _fused(node)}, node.inputs)


def _matmul(graph: Graph, node: Node) -> None:
    """MatMulFusion: a 2-D const B becomes FullConnection (its weight [out, in], the bias kept); else MatMul,
    whose bias (if any) is a following Add."""
    a, b = (graph.tensors[i] for i in node.inputs[:2])
    transpose_a, transpose_b = bool(node.attr("TransposeA")), bool(node.attr("TransposeB"))
    activation = _fused(node)
    copied = not transpose_b and node.inputs[1] in graph.variables     # a training weight is read where it lives
    if b.is_const and len(b.dims) == 2 and not transpose_a and not copied:
        weight = node.inputs[1] if transpose_b else graph.transposed(node.inputs[1])
        graph.add(node, "FullConnection", {"activation": activation}, [node.inputs[0], weight, *node.inputs[2:]])
        return
    if len(node.inputs) == 2:
        graph.add(node, "MatMul", dict(transpose_a=transpose_a, transpose_b=transpose_b, activation=activation),
                  node.inputs)
        return
    product = graph.add_tensor(f"{node.name}/product", a.data_type)
    graph.add(node, "MatMul", dict(transpose_a=transpose_a, transpose_b=transpose_b), node.inputs[:2], [product],
              "/matmul")
    graph.add(node, "Add", {"activation": activation}, [product, node.inputs[2]])


_ACTIVATIONS = {  # official type -> (our Activation attributes) beyond those numbered alike
    _A.LEAKY_RELU: lambda n: dict(type=_OA.LEAKY_RELU, alpha=n.attr("Alpha")),
    _A.ELU: lambda n: dict(type=_OA.ELU, alpha=n.attr("Alpha")),
    _A.HSIGMOID: lambda n: dict(type=_OA.HSIGMOID, alpha=1 / 6, beta=0.5),            # relu6(x + 3) / 6
    _A.HARD_TANH: lambda n: dict(type=_OA.HARD_TANH, min_val=n.attr("MinVal"), max_val=n.attr("MaxVal")),
    _A.RELU1: lambda n: dict(type=_OA.HARD_TANH, min_val=0.0, max_val=1.0),
    _A.GELU: lambda n: dict(type=_OA.GELU_TANH if n.attr("Approximate") else _OA.GELU),
}


def _activation(graph: Graph, node: Node) -> None:
    kind = node.attr("ActivationType")
    if kind == _A.ABS:
        graph.add(node, "Abs", {}, node.inputs[:1])
    elif kind == _A.LINEAR:
        graph.add(node, "Identity", {}, node.inputs[:1])
    elif kind in _ACTIVATIONS:
        graph.add(node, "Activation", _ACTIVATIONS[kind](node), node.inputs[:1])
    elif kind in _PLAIN_ACTIVATIONS - {_A.NO_ACTIVATION}:
        graph.add(node, "Activation", {"type": kind}, node.inputs[:1])
    else:
        raise node.refuse(f"activation type {kind} is not supported")


def _one_axis(node: Node, field: str) -> int:
    axes = node.ints(field)
    if len(axes) != 1:
        raise node.refuse(f"{field} {axes}: exactly one axis is supported")
    return axes[0]


def _transpose(graph: Graph, node: Node) -> None:
    perm = graph.const(node, 1, "perm").tolist()
    graph.add(node, "Transpose", {"perm": perm}, node.inputs[:1])


def _gather(graph: Graph, node: Node) -> None:
    axis = graph.const(node, 2, "axis").reshape(-1)
    if axis.size != 1:
        raise node.fail(f"its axis has {axis.size} values")
    graph.add(node, "Gather", {"axis": int(axis[0])}, node.inputs[:2])


def _with_axes(op: str) -> Callable[[Graph, Node], None]:
    def rule(graph: Graph, node: Node) -> None:
        """Squeeze/Unsqueeze: axes from the attribute or a const second input become our axes input (none:
        Squeeze drops every 1)."""
        axes = graph.const(node, 1, "axes").reshape(-1).tolist() if len(node.inputs) > 1 else node.ints("Axis")
        extra = [graph.add_const(f"{node.name}/axes", np.array(axes, np.int64))] if axes or op == "Unsqueeze" else []
        graph.add(node, op, {}, [node.inputs[0], *extra])
    return rule


def _expand_dims(graph: Graph, node: Node) -> None:
    axes = graph.const(node, 1, "axis").reshape(-1).astype(np.int64)
    graph.add(node, "Unsqueeze", {}, [node.inputs[0], graph.add_const(f"{node.name}/axes", axes)])


def _strided_slice(graph: Graph, node: Node) -> None:
    """StridedSlice (begin, end, strides with TensorFlow's masks) -> our Slice (starts, ends, axes, steps)."""
    for mask in ("EllipsisMask", "NewAxisMask", "ShrinkAxisMask"):
        if node.attr(mask):
            raise node.refuse(f"{mask} {node.attr(mask)} is not supported")
    begin, end = (graph.const(node, k, what).astype(np.int64) for k, what in ((1, "begin"), (2, "end")))
    # four inputs: x, begin, end, strides over the leading axes; five (from ONNX Slice): x, begin, end, axes, strides
    axes = graph.const(node, 3, "axes").astype(np.int64) if len(node.inputs) == 5 else np.arange(begin.size)
    strides = graph.const(node, len(node.inputs) - 1, "strides").astype(np.int64) if len(node.inputs) > 3 \
        else np.ones_like(begin)
    if not begin.shape == end.shape == strides.shape == axes.shape or begin.ndim != 1:
        raise node.fail(f"begin, end, axes and strides differ in shape ({begin.shape}, {end.shape}, {axes.shape}, "
                        f"{strides.shape})")
    begin, end = begin.copy(), end.copy()
    for k in range(begin.size):
        backwards = strides[k] < 0
        if node.attr("BeginMask") >> k & 1:
            begin[k] = _END if backwards else 0
        if node.attr("EndMask") >> k & 1:
            end[k] = -_END if backwards else _END
    consts = [graph.add_const(f"{node.name}/{what}", v)
              for what, v in (("starts", begin), ("ends", end), ("axes", axes), ("steps", strides))]
    graph.add(node, "Slice", {}, [node.inputs[0], *consts])


def _lrn(graph: Graph, node: Node) -> None:
    """LRN across channels: x / (bias + alpha * sum over [c - r, c + r] of x^2)^beta, which is ONNX's with
    size 2r + 1 and alpha scaled by the size."""
    region = node.attr("NormRegion")
    if region not in (None, b"ACROSS_CHANNELS"):
        raise node.refuse(f"norm region {region!r} is not supported (only ACROSS_CHANNELS)")
    size = 2 * node.attr("DepthRadius") + 1
    graph.add(node, "LRN", dict(size=size, alpha=node.attr("Alpha") * size, beta=node.attr("Beta"),
                                bias=node.attr("Bias")), node.inputs)


def _lstm(graph: Graph, node: Node) -> None:
    """LSTM: x [T, B, I], weights [D, 4H, I] and [D, 4H, H], bias [D, 8H], h0, c0 [D, B, H] -> y [T, D, B, H],
    h, c: ONNX's LSTM, gates in ONNX's order (i, o, f, c), as the converter keeps them from ONNX."""
    if node.attr("ProjSize") or node.attr("ZoneoutCell") or node.attr("ZoneoutHidden"):
        raise node.refuse("projection and zoneout are not supported")
    if node.attr("NumLayers") > 1:
        raise node.refuse(f"{node.attr('NumLayers')} stacked layers are not supported")
    directions = 2 if node.attr("Bidirectional") else 1
    acts = [ours.RnnActivation.SIGMOID, ours.RnnActivation.TANH, ours.RnnActivation.TANH] * directions
    graph.add(node, "LSTM", dict(hidden_size=node.attr("HiddenSize"), activations=acts,
                                 activation_alpha=[0.0] * len(acts), activation_beta=[0.0] * len(acts),
                                 direction=ours.RnnDirection.BIDIRECTIONAL if directions == 2
                                 else ours.RnnDirection.FORWARD),
              [*node.inputs[:4], -1, *node.inputs[4:6]])


def _instance_norm(graph: Graph, node: Node) -> None:
    """InstanceNorm of an NHWC x, scale and bias per channel: our GroupNorm with one group per channel."""
    x, scale = graph.tensors[node.inputs[0]], graph.tensors[node.inputs[1]]
    if len(x.dims) < 3 or len(scale.dims) != 1:
        raise node.refuse(f"input dims {list(x.dims)} and scale dims {list(scale.dims)}: only a known-rank "
                          f"channels-last input and per-channel scale are supported")
    graph.add(node, "GroupNorm", dict(num_groups=scale.dims[0], epsilon=node.attr("Epsilon"), axis=len(x.dims) - 1),
              node.inputs)


_RESIZE_METHODS = {fb.ResizeMethod.LINEAR: ours.ResizeMode.LINEAR, fb.ResizeMethod.NEAREST: ours.ResizeMode.NEAREST,
                   fb.ResizeMethod.CUBIC: ours.ResizeMode.CUBIC}
_COORDINATES = {fb.CoordinateTransformMode.ASYMMETRIC: ours.CoordinateTransform.ASYMMETRIC,
                fb.CoordinateTransformMode.ALIGN_CORNERS: ours.CoordinateTransform.ALIGN_CORNERS,
                fb.CoordinateTransformMode.HALF_PIXEL: ours.CoordinateTransform.HALF_PIXEL}
_ROUNDINGS = {fb.NearestMode.ROUND_HALF_DOWN: ours.NearestRounding.ROUND_PREFER_FLOOR,
              fb.NearestMode.ROUND_HALF_UP: ours.NearestRounding.ROUND_PREFER_CEIL,
              fb.NearestMode.FLOOR: ours.NearestRounding.FLOOR, fb.NearestMode.CEIL: ours.NearestRounding.CEIL}


def _resize(graph: Graph, node: Node) -> None:
    """Resize of an NHWC x over H and W: by the float scales or int sizes of a const second input, else to
    new_height x new_width."""
    _nhwc(node)
    method, coordinates = node.attr("Method"), node.attr("CoordinateTransformMode")
    if method not in _RESIZE_METHODS or coordinates not in _COORDINATES:
        raise node.refuse(f"method {method} with coordinate transform {coordinates} is not supported")
    rounding = _ROUNDINGS.get(node.attr("NearestMode"), ours.NearestRounding.ROUND_PREFER_FLOOR)
    if method == fb.ResizeMethod.NEAREST and node.attr("NearestMode") not in _ROUNDINGS:
        raise node.refuse(f"nearest mode {node.attr('NearestMode')} is not supported")
    if len(node.inputs) > 1:
        values = graph.const(node, 1, "scales or sizes", integer=False).reshape(-1)
        target = graph.tensors[node.inputs[1]]
        integer = target.data_type in _INT_TYPES
    else:
        values, integer = np.array([node.attr("NewHeight"), node.attr("NewWidth")]), True
    if values.size != 2:
        raise node.refuse(f"{values.size} scales or sizes: only H and W (2) are supported")
    given = graph.add_const(f"{node.name}/{'sizes' if integer else 'scales'}",
                            values.astype(np.int64 if integer else np.float32))
    graph.add(node, "Resize", dict(mode=_RESIZE_METHODS[method], coordinate_transform=_COORDINATES[coordinates],
                                   nearest_rounding=rounding, cubic_coeff_a=node.attr("CubicCoeff"),
                                   exclude_outside=bool(node.attr("ExcludeOutside")),
                                   extrapolation_value=node.attr("ExtrapolationValue"), axes=[1, 2]),
              [node.inputs[0], -1, *([-1, given] if integer else [given])])


def _arg_max(graph: Graph, node: Node) -> None:
    """ArgMaxFusion: indices of the maxima along one axis (top_k 1, no values output)."""
    if node.attr("TopK") != 1 or node.attr("OutMaxValue") or len(node.outputs) != 1:
        raise node.refuse("only top_k 1 without the max values is supported")
    graph.add_narrowing(node, "ArgMinMax", dict(mode=ours.ArgMode.MAX, axis=node.attr("Axis"),
                                                keep_dims=bool(node.attr("KeepDims"))), node.inputs, (0,))


def _top_k(graph: Graph, node: Node) -> None:
    graph.add_narrowing(node, "TopK", dict(axis=node.attr("Axis"), largest=bool(node.attr("Largest")),
                                           sorted=bool(node.attr("Sorted"))),
                        [node.inputs[0], graph.int64_input(node, 1)], (1,))


_R, _OR = fb.ReduceMode, ours.ReduceMode
_REDUCE_MODES = {_R.ReduceMean: _OR.MEAN, _R.ReduceMax: _OR.MAX, _R.ReduceMin: _OR.MIN, _R.ReduceProd: _OR.PROD,
                 _R.ReduceSum: _OR.SUM, _R.ReduceSumSquare: _OR.SUM_SQUARE, _R.ReduceASum: _OR.L1, _R.ReduceL2: _OR.L2}


def _reduce(graph: Graph, node: Node) -> None:
    """ReduceFusion over the axes of its second input."""
    mode = node.attr("Mode")
    if mode not in _REDUCE_MODES or node.attr("ReduceToEnd") or node.attr("Coeff") not in (0.0, 1.0):
        raise node.refuse(f"mode {mode} (reduce_to_end {node.attr('ReduceToEnd')}, coeff {node.attr('Coeff')}) "
                          f"is not supported")
    axes = [graph.int64_input(node, 1)] if len(node.inputs) > 1 else []
    graph.add(node, "Reduce", dict(mode=_REDUCE_MODES[mode], keep_dims=bool(node.attr("KeepDims"))),
              [node.inputs[0], *axes])


def _exp(graph: Graph, node: Node) -> None:
    if (node.attr("Base"), node.attr("Scale"), node.attr("Shift")) != (-1.0, 1.0, 0.0):
        raise node.refuse("only the natural exponential (base e, scale 1, shift 0) is supported")
    graph.add(node, "Exp", {}, node.inputs)


def _gather_elements(graph: Graph, node: Node) -> None:
    """GatherD: data, dim (const), index."""
    dim = graph.const(node, 1, "dim").reshape(-1)
    if dim.size != 1:
        raise node.fail(f"its dim has {dim.size} values")
    graph.add(node, "GatherElements", {"axis": int(dim[0])}, [node.inputs[0], node.inputs[2]])


def _constant_of_shape(graph: Graph, node: Node) -> None:
    values = node.ints("Value")
    if len(values) > 1:
        raise node.refuse(f"{len(values)} fill values: one is supported")
    graph.add(node, "ConstantOfShape", dict(data_type=graph.tensors[node.outputs[0]].data_type,
                                            value=float(values[0]) if values else 0.0),
              [graph.int64_input(node, 0)])


def _compare(mode: int) -> Callable[[Graph, Node], None]:
    return lambda graph, node: graph.add(node, "Compare", {"mode": mode}, node.inputs)


def _pad(graph: Graph, node: Node) -> None:
    """PadFusion: paddings as (begin, end) pairs per axis (the second input, else the attribute) -> our Pad's
    begins then ends."""
    mode = node.attr("PaddingMode")
    modes = {fb.PaddingMode.CONSTANT: ours.PaddingFill.CONSTANT, fb.PaddingMode.REFLECT: ours.PaddingFill.REFLECT}
    if mode not in modes:
        raise node.refuse(f"padding mode {mode} is not supported")
    if len(node.inputs) > 1:
        pairs = graph.const(node, 1, "paddings").reshape(-1).astype(np.int64)
    else:
        table = node.attr("Paddings")
        rows = [table.Data(k) for k in range(table.DataLength())] if table is not None else []
        pairs = np.array([v for row in rows for v in (row.DataAsNumpy().tolist() if row.DataLength() else [])],
                         np.int64)
    if pairs.size % 2:
        raise node.fail(f"has {pairs.size} padding values, not (begin, end) pairs")
    pads = graph.add_const(f"{node.name}/pads", np.concatenate([pairs[0::2], pairs[1::2]]))
    value = graph.add_const(f"{node.name}/value", np.array(node.attr("ConstantValue"), np.float32))
    graph.add(node, "Pad", {"mode": modes[mode]}, [node.inputs[0], pads, value])


def _split(graph: Graph, node: Node) -> None:
    """Split along one axis into the sizes of the second input or attribute (equal parts without either)."""
    sizes = graph.const(node, 1, "sizes").reshape(-1) if len(node.inputs) > 1 else np.array(node.ints("SizeSplits"))
    extra = [graph.add_const(f"{node.name}/sizes", sizes.astype(np.int64))] if sizes.size else []
    graph.add(node, "Split", {"axis": node.attr("Axis")}, [node.inputs[0], *extra])


def _tile(graph: Graph, node: Node) -> None:
    if len(node.inputs) > 1:
        repeats = graph.int64_input(node, 1)
    else:
        repeats = graph.add_const(f"{node.name}/repeats", np.array(node.ints("Dims"), np.int64))
    graph.add(node, "Tile", {}, [node.inputs[0], repeats])


def _prelu(graph: Graph, node: Node) -> None:
    """PReLUFusion: one slope per channel (the last axis of the NHWC input) whatever the slope's stored shape, or
    one shared slope."""
    slope = graph.const(node, 1, "slope", integer=False).reshape(-1)
    graph.add(node, "PReLU", {}, [node.inputs[0], graph.add_const(f"{node.name}/slope", slope.astype(np.float32))])


def _layer_norm(graph: Graph, node: Node) -> None:
    """LayerNormFusion: normalise over [begin_norm_axis, rank); gamma and beta over the same axes."""
    if node.attr("BeginParamsAxis") != node.attr("BeginNormAxis"):
        raise node.refuse("params and normalised axes that differ are not supported")
    graph.add(node, "LayerNorm", dict(axis=node.attr("BeginNormAxis"), epsilon=node.attr("Epsilon")), node.inputs)


def _scale(graph: Graph, node: Node) -> None:
    """ScaleFusion: x * scale (+ bias), scale and bias running along `axis` (const ones reshaped to broadcast
    there), then the fused activation."""
    x = graph.tensors[node.inputs[0]]
    rank, axis = len(x.dims), node.attr("Axis")
    axis = axis + rank if axis < 0 else axis
    operands = list(node.inputs[1:])
    if axis != rank - 1:
        if not 0 <= axis < rank or not all(graph.tensors[i].is_const for i in operands):
            raise node.refuse(f"a computed scale along axis {node.attr('Axis')} is not supported (only the last)")
        trailing = (1,) * (rank - 1 - axis)
        operands = [graph.add_const(f"{graph.tensors[i].name}/along_{axis}",
                                    graph.tensors[i].data.reshape(graph.tensors[i].data.shape + trailing))
                    for i in operands]
    activation = _fused(node)
    if len(operands) < 2:
        graph.add(node, "Mul", {"activation": activation}, [node.inputs[0], *operands])
        return
    scaled = graph.add_tensor(f"{node.name}/scaled", x.data_type)
    graph.add(node, "Mul", {}, [node.inputs[0], operands[0]], [scaled], "/scale")
    graph.add(node, "Add", {"activation": activation}, [scaled, operands[1]])


def _pow(graph: Graph, node: Node) -> None:
    if (node.attr("Scale"), node.attr("Shift")) != (1.0, 0.0):
        raise node.refuse("only scale 1 and shift 0 are supported")
    graph.add(node, "Pow", {}, node.inputs)


def _unary(op: str, mode: int | None = None) -> Callable[[Graph, Node], None]:
    return lambda graph, node: graph.add(node, op, {} if mode is None else {"mode": mode}, node.inputs[:1])


def _reshape(graph: Graph, node: Node) -> None:
    graph.add(node, "Reshape", {}, node.inputs[:2])


_RULES: dict[str, Callable[[Graph, Node], None]] = {
    "Conv2DFusion": _conv,
    "Conv2dTransposeFusion": _conv_transpose,
    "MaxPoolFusion": _pool(ours.PoolMode.MAX),
    "AvgPoolFusion": _pool(ours.PoolMode.AVG),
    "AddFusion": _arithmetic("Add"),
    "SubFusion": _arithmetic("Sub"),
    "MulFusion": _arithmetic("Mul"),
    "DivFusion": _arithmetic("Div"),
    "RealDiv": _arithmetic("Div", fused=False),
    "FullConnection": _full_connection,
    "MatMulFusion": _matmul,
    "Activation": _activation,
    "Reshape": _reshape,
    "QuantDTypeCast": lambda g, n: g.add(n, "QuantDTypeCast", {"src_t": n.attr("SrcT"), "dst_t": n.attr("DstT")},
                                         n.inputs),
    "LRN": _lrn,
    "LSTM": _lstm,
    "InstanceNorm": _instance_norm,
    "Resize": _resize,
    "ArgMaxFusion": _arg_max,
    "TopKFusion": _top_k,
    "ReduceFusion": _reduce,
    "ExpFusion": _exp,
    "GatherD": _gather_elements,
    "ConstantOfShape": _constant_of_shape,
    "Equal": _compare(ours.CompareMode.EQUAL),
    "Greater": _compare(ours.CompareMode.GREATER),
    "GreaterEqual": _compare(ours.CompareMode.GREATER_EQUAL),
    "Less": _compare(ours.CompareMode.LESS),
    "LessEqual": _compare(ours.CompareMode.LESS_EQUAL),
    "Where": lambda g, n: g.add(n, "Where", {}, n.inputs),
    "PadFusion": _pad,
    "Split": _split,
    "TileFusion": _tile,
    "PReLUFusion": _prelu,
    "LayerNormFusion": _layer_norm,
    "ScaleFusion": _scale,
    "PowFusion": _pow,
    "Maximum": _arithmetic("Maximum", fused=False),
    "Minimum": _arithmetic("Minimum", fused=False),
    "Abs": _unary("Abs"), "Sqrt": _unary("Sqrt"), "Neg": _unary("Neg"), "Log": _unary("Log"), "Erf": _unary("Erf"),
    **{op: _unary("UnaryMath", getattr(ours.UnaryMathMode, op.upper()))
       for op in ("Floor", "Ceil", "Round", "Reciprocal", "Sin", "Cos")},
    "Range": lambda g, n: g.add(n, "Range", {}, n.inputs),
    "Cast": lambda g, n: g.add(n, "Cast", {"to": int(g.const(n, 1, "target type").reshape(-1)[0])}, n.inputs[:1]),
    "BroadcastTo": lambda g, n: g.add(n, "Expand", {}, [n.inputs[0], g.int64_input(n, 1)]),
    "Shape": lambda g, n: g.add_narrowing(n, "Shape", {}, n.inputs, (0,)),
    "NonMaxSuppression": lambda g, n: g.add_narrowing(n, "NonMaxSuppression", {
        "center_point_box": n.attr("CenterPointBox")}, [n.inputs[0], n.inputs[1], *(
            [g.int64_input(n, 2)] if len(n.inputs) > 2 else []), *n.inputs[3:]], (0,)),
    "Transpose": _transpose,
    "Concat": lambda g, n: g.add(n, "Concat", {"axis": n.attr("Axis")}, n.inputs),
    "Softmax": lambda g, n: g.add(n, "Softmax", {"axis": _one_axis(n, "Axis")}, n.inputs[:1]),
    "Flatten": lambda g, n: g.add(n, "Flatten", {"axis": n.attr("Axis")}, n.inputs[:1]),
    "Squeeze": _with_axes("Squeeze"),
    "Unsqueeze": _with_axes("Unsqueeze"),
    "ExpandDims": _expand_dims,
    "Gather": _gather,
    "StridedSlice": _strided_slice,
}
_ARITY = {  # (fewest, most) inputs of the official node
    "Conv2DFusion": (2, 3), "Conv2dTransposeFusion": (2, 3), "MaxPoolFusion": (1, 1), "AvgPoolFusion": (1, 1),
    "AddFusion": (2, 2),
    "SubFusion": (2, 2), "MulFusion": (2, 2), "DivFusion": (2, 2), "RealDiv": (2, 2), "FullConnection": (2, 3),
    "MatMulFusion": (2, 3), "Activation": (1, 1), "Reshape": (2, 2), "Transpose": (2, 2), "Concat": (1, 1 << 16),
    "Softmax": (1, 1), "Flatten": (1, 1), "Squeeze": (1, 2), "Unsqueeze": (1, 2), "ExpandDims": (2, 2),
    "QuantDTypeCast": (1, 1),
    "Gather": (3, 3), "StridedSlice": (3, 5), "LRN": (1, 1), "LSTM": (6, 6),
    "InstanceNorm": (3, 3), "Resize": (1, 2), "ArgMaxFusion": (1, 1), "TopKFusion": (2, 2), "ReduceFusion": (1, 2),
    "ExpFusion": (1, 1), "GatherD": (3, 3), "ConstantOfShape": (1, 1), "Equal": (2, 2), "Greater": (2, 2),
    "GreaterEqual": (2, 2), "Less": (2, 2), "LessEqual": (2, 2), "Where": (3, 3), "Range": (3, 3), "Cast": (2, 2),
    "BroadcastTo": (2, 2), "Shape": (1, 1), "NonMaxSuppression": (2, 5), "PadFusion": (1, 2), "Split": (1, 2),
    "TileFusion": (1, 2), "PReLUFusion": (2, 2), "LayerNormFusion": (3, 3), "ScaleFusion": (2, 3),
    "PowFusion": (2, 2), "Maximum": (2, 2), "Minimum": (2, 2),
    **{op: (1, 1) for op in ("Abs", "Sqrt", "Neg", "Log", "Erf", "Floor", "Ceil", "Round", "Reciprocal", "Sin", "Cos")},
}
