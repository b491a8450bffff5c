"""The runtime's graph definitions -> MindSpore Lite's own `.ms` bytes (`MSL2`), which the official runtime runs.

The inverse of `ops.py`: each of our ops becomes the official primitive(s) the official converter would write for
it (Conv2D -> Conv2DFusion, FullConnection -> MatMulFusion with transposed B, Add -> AddFusion, ...), our
attributes that the official op takes as const inputs (Transpose's perm) become int32 const tensors, a
convolution's or fully connected layer's fused residual becomes a following AddFusion, and our fused Attention
the MatMulFusion, MulFusion, Softmax, MatMulFusion chain it stands for. The graph keeps our converter's layout:
inputs and outputs as the source model lays them out, NHWC inside between the Transposes our converter inserted,
so the official runtime is fed the same arrays as onnxruntime. Full-quant int8 graphs keep their tensors' quant
params (per tensor, or per output channel of the weights) and mark their nodes QUANT_ALL. What the official format
or runtime cannot take (an op without an official counterpart, an attribute value its kernels do not honour,
weight-quant nodes, quantization of other than 8 bits) is refused with `NotSupportedError` naming the op and node
or tensor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import flatbuffers
import numpy as np

from lite.dtypes import DataType, from_numpy
from lite.format.mspy.writer import _aligned_bytes, _ints, _tables     # FlatBuffers vectors, as ours
from lite.model import NodeDef, SubGraphDef, TensorDef
from lite.status import NotSupportedError
from schema import FMK_ONNX
from schema import fb as ours
from schema.mindspore_lite import FILE_IDENTIFIER, fb

_F = fb.Format
_VALUE_NODE, _CNODE = 0, 2        # the official tensor node types: const, computed (graph inputs are computed too)
_OA, _A = ours.ActivationType, fb.ActivationType
# Our activation types numbered as the official ones that need no parameter: fusable into any official op.
_PLAIN = {_OA.NO_ACTIVATION, _OA.RELU, _OA.SIGMOID, _OA.RELU6, _OA.SOFTSIGN, _OA.SOFTPLUS, _OA.TANH, _OA.HSWISH,
          _OA.SWISH}
_PAD_MODES = {ours.PadMode.PAD: fb.PadMode.PAD, ours.PadMode.SAME_UPPER: fb.PadMode.SAME,
              ours.PadMode.VALID: fb.PadMode.VALID}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_KERNEL_FUSED = {_A.NO_ACTIVATION, _A.RELU, _A.RELU6}     # what the official kernels apply themselves
_TO_NHWC, _TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]
_SLOPE = 4                # a Conv2D's fused PReLU slope: after x, weight, bias and the residual


@dataclass
class _Tensor:
    name: str
    node_type: int
    data_type: int
    dims: tuple[int, ...]
    format: int = _F.NCHW
    data: np.ndarray | None = None
    quant_params: list[Any] = field(default_factory=list)     # ours (QuantParamT): one, or one per channel
    beyond_int32: bool = False  # int64 values the official int32 cannot hold: refused where an official node reads it


@dataclass
class _Node:
    name: str
    op: str                     # the official primitive
    fields: dict[str, Any]      # its attribute table, by the schema's field names
    inputs: list[int]
    outputs: list[int]


@dataclass
class _Graph:
    """The official graph being built from ours: tensors (ours first, same indices, then the ones rules add)."""
    tensors: list[_Tensor]
    nodes: list[_Node] = field(default_factory=list)

    def add(self, n: NodeDef, op: str, fields: dict[str, Any], inputs: list[int], outputs: list[int] | None = None,
            part: str = "") -> None:
        """The official `op`; a fused activation its kernels do not take (only ReLU and ReLU6) as an Activation
        node after it."""
        outputs = list(n.outputs) if outputs is None else outputs
        kind = fields.get("activation_type", _A.NO_ACTIVATION)
        if op == "Activation" or kind in _KERNEL_FUSED:
            self.nodes.append(_Node(n.name + part, op, fields, inputs, outputs))
            return
        if self.tensors[outputs[0]].quant_params:
            raise _refuse(n, f"an int8 output with fused activation type {kind}")
        before = self.computed(f"{n.name}{part}/before_activation", outputs[0])
        self.nodes.append(_Node(n.name + part, op, {**fields, "activation_type": _A.NO_ACTIVATION}, inputs,
                                [before, *outputs[1:]]))
        self.nodes.append(_Node(f"{n.name}{part}/activation", "Activation", dict(activation_type=kind), [before],
                                outputs[:1]))

    def const(self, name: str, values: np.ndarray) -> int:
        data = np.ascontiguousarray(values)
        self.tensors.append(_Tensor(name, _VALUE_NODE, from_numpy(data.dtype), data.shape, _F.NCHW, data))
        return len(self.tensors) - 1

    def computed(self, name: str, like: int, dims: Sequence[int] | None = None) -> int:
        """A computed tensor of `like`'s type, and of its dims unless given."""
        t = self.tensors[like]
        self.tensors.append(_Tensor(name, _CNODE, t.data_type, t.dims if dims is None else tuple(dims), t.format))
        return len(self.tensors) - 1

    def then_residual(self, n: NodeDef, op: str, fields: dict[str, Any], inputs: list[int],
                      outputs: list[int] | None = None) -> None:
        """`op` of our node `n` whose fourth input, if any, is a fused residual: without one, `op` with the fused
        activation; with one, `op` and an AddFusion after it carrying the activation (our kernels add the residual
        before activating). Into `outputs` if given, else the node's."""
        activation = _activation(n)
        residual = n.inputs[3] if len(n.inputs) > 3 and n.inputs[3] >= 0 else None
        if residual is None:
            self.add(n, op, {**fields, "activation_type": activation}, inputs, outputs)
            return
        product = self.computed(f"{n.name}/product", n.outputs[0])
        self.add(n, op, {**fields, "activation_type": _A.NO_ACTIVATION}, inputs, [product], "/product")
        missing = self.tensors[n.outputs[0]].dims[-1] - self.tensors[residual].dims[-1]
        if missing:                      # a residual of fewer channels: zero channels appended, as before fusion
            pairs = np.zeros((len(self.tensors[residual].dims), 2), np.int32)
            pairs[-1, 1] = missing
            padded = self.computed(f"{n.name}/padded_residual", n.outputs[0])
            self.add(n, "PadFusion", dict(padding_mode=fb.PaddingMode.CONSTANT, constant_value=0.0),
                     [residual, self.const(f"{n.name}/residual_paddings", pairs)], [padded], "/residual_padding")
            residual = padded
        self.add(n, "AddFusion", dict(activation_type=activation), [product, residual], outputs)


def _refuse(n: NodeDef, what: str) -> NotSupportedError:
    return NotSupportedError(f"{n.op} node '{n.name}': {what}, which MindSpore Lite's format cannot express")


def _activation(n: NodeDef) -> int:
    kind = getattr(n.attrs, "activation", _OA.NO_ACTIVATION)
    if kind not in _PLAIN:
        raise _refuse(n, f"fused activation type {kind}")
    return kind


def _conv(g: _Graph, n: NodeDef) -> None:
    """Conv2D (plain, grouped or depthwise): the same weights ([out, kh, kw, in / group]); a fused PReLU slope (our
    converter's `fuse_prelu`: input 4, one value per output channel) as a PReLUFusion after it."""
    a = n.attrs
    if a.pad_mode not in _PAD_MODES:
        raise _refuse(n, f"pad mode {a.pad_mode}")
    fields = dict(format=_F.NHWC, kernel_size=[a.kernel_h, a.kernel_w], stride=[a.stride_h, a.stride_w],
                  dilation=[a.dilation_h, a.dilation_w], pad_mode=_PAD_MODES[a.pad_mode],
                  pad_list=[a.pad_top, a.pad_bottom, a.pad_left, a.pad_right], group=a.group,
                  in_channel=a.in_channel, out_channel=a.out_channel)
    inputs = [i for i in n.inputs[:3] if i >= 0]
    slope = n.inputs[_SLOPE] if len(n.inputs) > _SLOPE and n.inputs[_SLOPE] >= 0 else None
    if slope is None:
        g.then_residual(n, "Conv2DFusion", fields, inputs)
        return
    before = g.computed(f"{n.name}/before_prelu", n.outputs[0])
    g.then_residual(n, "Conv2DFusion", fields, inputs, [before])
    g.add(n, "PReLUFusion", dict(channel_shared=int(np.prod(g.tensors[slope].dims)) == 1), [before, slope],
          part="/prelu")


def _conv_transpose(g: _Graph, n: NodeDef) -> None:
    """Conv2DTranspose: Conv2dTransposeFusion, the same weights ([in, kh, kw, out / group]), ONNX's output
    padding; an output size given instead of pads is refused (our converter turns ONNX's into pads), and groups
    other than depthwise ones (the 2.0.0 runtime: "deconv do not support group deconv")."""
    a = n.attrs
    if a.pad_mode not in _PAD_MODES or a.output_h or a.output_w:
        raise _refuse(n, f"pad mode {a.pad_mode} with output size {a.output_h}x{a.output_w}")
    weight = g.tensors[n.inputs[1]].dims
    if a.group > 1 and (len(weight) != 4 or weight[0] != a.group or weight[3] != 1):
        raise _refuse(n, f"{a.group} groups of a weight {list(weight)}, not depthwise")
    g.add(n, "Conv2dTransposeFusion", dict(
        format=_F.NHWC, kernel_size=[a.kernel_h, a.kernel_w], stride=[a.stride_h, a.stride_w],
        dilation=[a.dilation_h, a.dilation_w], pad_mode=_PAD_MODES[a.pad_mode],
        pad_list=[a.pad_top, a.pad_bottom, a.pad_left, a.pad_right], group=a.group, in_channel=a.in_channel,
        out_channel=a.out_channel, output_paddings=[a.output_pad_h, a.output_pad_w],
        activation_type=_activation(n)), [i for i in n.inputs[:3] if i >= 0])


def _pool(g: _Graph, n: NodeDef) -> None:
    """Pooling, max or average; the official average counts only the taps inside the input."""
    a = n.attrs
    ops = {ours.PoolMode.MAX: "MaxPoolFusion", ours.PoolMode.AVG: "AvgPoolFusion"}
    if a.mode not in ops or a.pad_mode not in _PAD_MODES or (a.dilation_h, a.dilation_w) != (1, 1):
        raise _refuse(n, f"mode {a.mode}, pad mode {a.pad_mode}, dilation {a.dilation_h}x{a.dilation_w}")
    pads = [a.pad_top, a.pad_bottom, a.pad_left, a.pad_right]
    if a.mode == ours.PoolMode.AVG and a.count_include_pad and any(pads) and not a.global_pool:
        raise _refuse(n, "an average that counts the padding")
    fields = dict(format=_F.NHWC, global_=bool(a.global_pool), pad_mode=_PAD_MODES[a.pad_mode],
                  round_mode=fb.RoundMode.CEIL if a.ceil_mode else fb.RoundMode.FLOOR,
                  activation_type=_activation(n), strides=[a.stride_h, a.stride_w], pad=pads)
    if not a.global_pool:     # the official runtime needs strides and pads even of a global pooling
        fields["kernel_size"] = [a.kernel_h, a.kernel_w]
    g.add(n, ops[a.mode], fields, n.inputs[:1])


def _fused(op: str) -> Callable[[_Graph, NodeDef], None]:
    return lambda g, n: g.add(n, op, dict(activation_type=_activation(n)), n.inputs)


def _plain(op: str) -> Callable[[_Graph, NodeDef], None]:
    return lambda g, n: g.add(n, op, {}, n.inputs)


def _full_connection(g: _Graph, n: NodeDef) -> None:
    """FullConnection (weight [out, in]) as the official converter writes ONNX's Gemm: MatMulFusion, B transposed."""
    g.then_residual(n, "MatMulFusion", dict(transpose_a=False, transpose_b=True), [i for i in n.inputs[:3] if i >= 0])


def _matmul(g: _Graph, n: NodeDef) -> None:
    a = n.attrs
    g.add(n, "MatMulFusion", dict(transpose_a=bool(a.transpose_a), transpose_b=bool(a.transpose_b),
                                  activation_type=_activation(n)), n.inputs)


def _transpose(g: _Graph, n: NodeDef) -> None:
    perm = g.const(f"{n.name}/perm", np.asarray(n.attrs.perm, np.int32))
    g.add(n, "Transpose", {}, [n.inputs[0], perm])


def _reshape(g: _Graph, n: NodeDef) -> None:
    if getattr(n.attrs, "allowzero", False):
        raise _refuse(n, "allowzero")
    g.add(n, "Reshape", {}, n.inputs[:2])


def _flatten(g: _Graph, n: NodeDef) -> None:
    """Flatten; of int8 data (for which the official runtime has no Flatten kernel) a Reshape to the output's
    dims."""
    x, y = g.tensors[n.inputs[0]], g.tensors[n.outputs[0]]
    if not x.quant_params:
        g.add(n, "Flatten", dict(axis=n.attrs.axis), n.inputs[:1])
        return
    if not y.dims or min(y.dims) < 0:
        raise _refuse(n, f"a quantized Flatten to unknown dims {list(y.dims)}")
    g.add(n, "Reshape", {}, [n.inputs[0], g.const(f"{n.name}/shape", np.asarray(y.dims, np.int32))])


def _lrn(g: _Graph, n: NodeDef) -> None:
    """LRN across channels of an odd size 2r + 1: the official depth radius r, alpha per tap."""
    a = n.attrs
    if a.size % 2 == 0:
        raise _refuse(n, f"an even size {a.size}")
    g.add(n, "LRN", dict(depth_radius=a.size // 2, bias=a.bias, alpha=a.alpha / a.size, beta=a.beta,
                         norm_region="ACROSS_CHANNELS"), n.inputs[:1])


def _group_norm(g: _Graph, n: NodeDef) -> None:
    """GroupNorm of one group per channel over the last axis (our InstanceNorm): the official InstanceNorm."""
    x, scale = g.tensors[n.inputs[0]], g.tensors[n.inputs[1]]
    if len(scale.dims) != 1 or n.attrs.num_groups != scale.dims[0] or n.attrs.axis not in (-1, len(x.dims) - 1):
        raise _refuse(n, f"{n.attrs.num_groups} groups along axis {n.attrs.axis}, not one per channel of the "
                         f"last axis")
    g.add(n, "InstanceNorm", dict(epsilon=n.attrs.epsilon), n.inputs[:3])


_RM, _CT, _NR = ours.ResizeMode, ours.CoordinateTransform, ours.NearestRounding
_RESIZE_METHODS = {_RM.NEAREST: fb.ResizeMethod.NEAREST, _RM.LINEAR: fb.ResizeMethod.LINEAR,
                   _RM.CUBIC: fb.ResizeMethod.CUBIC}
_COORDINATES = {_CT.HALF_PIXEL: fb.CoordinateTransformMode.HALF_PIXEL,
                _CT.ASYMMETRIC: fb.CoordinateTransformMode.ASYMMETRIC,
                _CT.ALIGN_CORNERS: fb.CoordinateTransformMode.ALIGN_CORNERS}
_ROUNDINGS = {_NR.ROUND_PREFER_FLOOR: fb.NearestMode.ROUND_HALF_DOWN, _NR.ROUND_PREFER_CEIL: fb.NearestMode.ROUND_HALF_UP,
              _NR.FLOOR: fb.NearestMode.FLOOR, _NR.CEIL: fb.NearestMode.CEIL}


def _resize(g: _Graph, n: NodeDef) -> None:
    """Resize of an NHWC tensor over H and W to the output's known size (new_height x new_width)."""
    a = n.attrs
    x, y = g.tensors[n.inputs[0]].dims, g.tensors[n.outputs[0]].dims
    if len(x) != 4 or len(y) != 4 or min(y) < 0 or (x[0], x[3]) != (y[0], y[3]):
        raise _refuse(n, f"a resize from {list(x)} to {list(y)}, not of the known H and W of an NHWC tensor")
    if a.mode not in _RESIZE_METHODS or a.coordinate_transform not in _COORDINATES or a.antialias or \
            a.nearest_rounding not in _ROUNDINGS or a.aspect_policy:
        raise _refuse(n, f"mode {a.mode} with coordinate transform {a.coordinate_transform}, nearest rounding "
                         f"{a.nearest_rounding}, antialias {a.antialias}, aspect policy {a.aspect_policy}")
    g.add(n, "Resize", dict(format=_F.NHWC, method=_RESIZE_METHODS[a.mode], new_height=y[1], new_width=y[2],
                            coordinate_transform_mode=_COORDINATES[a.coordinate_transform],
                            cubic_coeff=a.cubic_coeff_a, exclude_outside=int(a.exclude_outside),
                            extrapolation_value=a.extrapolation_value, nearest_mode=_ROUNDINGS[a.nearest_rounding]),
          n.inputs[:1])


def _arg_min_max(g: _Graph, n: NodeDef) -> None:
    """ArgMax/ArgMin along one axis: the official ArgMaxFusion/ArgMinFusion, whose indices are int32 (as the
    official converter's files give them), where ours are int64."""
    a = n.attrs
    if a.select_last_index:
        raise _refuse(n, "selecting the last of equal extremes")
    out = g.tensors[n.outputs[0]]
    if out.data_type == DataType.INT64:
        out.data_type = DataType.INT32
    op = "ArgMaxFusion" if a.mode == ours.ArgMode.MAX else "ArgMinFusion"
    g.add(n, op, dict(axis=a.axis, top_k=1, keep_dims=bool(a.keep_dims), out_max_value=False), n.inputs[:1])


def _top_k(g: _Graph, n: NodeDef) -> None:
    """TopK of the largest values, a const k, along one axis: TopKFusion, k an int32 input, its indices int32 (ours
    are int64), a missing output a tensor of its own. The smallest are refused: the 2.0.0 runtime ignores
    `largest` and gives the largest."""
    if not n.attrs.largest:
        raise _refuse(n, "the smallest values")
    k = g.const(f"{n.name}/k", _int32_values(g, n, 1, "k"))
    given = [*n.outputs, -1][:2]
    values = given[0] if given[0] >= 0 else g.computed(f"{n.name}/values", n.inputs[0])
    indices = given[1] if given[1] >= 0 else g.computed(f"{n.name}/indices", values)
    g.tensors[indices].data_type = DataType.INT32
    g.add(n, "TopKFusion", dict(sorted=bool(n.attrs.sorted), axis=n.attrs.axis, largest=1), [n.inputs[0], k],
          [values, indices])


def _int32_values(g: _Graph, n: NodeDef, k: int, what: str) -> np.ndarray:
    """Our const input k as int32 values, beyond-int32 ones clamped (`_official_tensor`: INT64_MAX, "to the end",
    as the official converter writes it)."""
    t = g.tensors[n.inputs[k]] if len(n.inputs) > k and n.inputs[k] >= 0 else None
    if t is None or t.data is None:
        raise _refuse(n, f"a {what} computed at run time")
    return t.data.astype(np.int32).reshape(-1)


def _slice(g: _Graph, n: NodeDef) -> None:
    """Slice (starts, ends, axes?, steps?) as the official converter writes ONNX's: StridedSlice of five inputs
    (begin, end, axes, strides) and no masks."""
    starts = _int32_values(g, n, 1, "start")
    axes = _int32_values(g, n, 3, "axes") if len(n.inputs) > 3 and n.inputs[3] >= 0 else \
        np.arange(starts.size, dtype=np.int32)
    steps = _int32_values(g, n, 4, "step") if len(n.inputs) > 4 and n.inputs[4] >= 0 else np.ones_like(starts)
    consts = [g.const(f"{n.name}/{what}", v) for what, v in (("begin", starts), ("end", _int32_values(g, n, 2, "end")),
                                                               ("axes", axes), ("strides", steps))]
    g.add(n, "StridedSlice", {}, [n.inputs[0], *consts])


def _gather(g: _Graph, n: NodeDef) -> None:
    """Gather along one axis: the axis an int32 const third input, as the official converter writes it."""
    g.add(n, "Gather", {}, [*n.inputs[:2], g.const(f"{n.name}/axis", np.array([n.attrs.axis], np.int32))])


def _gather_elements(g: _Graph, n: NodeDef) -> None:
    """GatherElements: the official GatherD of data, the axis an int32 const, and the indices."""
    g.add(n, "GatherD", {}, [n.inputs[0], g.const(f"{n.name}/dim", np.array([n.attrs.axis], np.int32)),
                             n.inputs[1]])


def _expand(g: _Graph, n: NodeDef) -> None:
    """Expand to the output's known dims (ONNX's two-way broadcast made one-way): BroadcastTo with int32 dims."""
    dims = g.tensors[n.outputs[0]].dims
    if min(dims, default=-1) < 0:
        raise _refuse(n, f"an output of unknown dims {list(dims)}")
    g.add(n, "BroadcastTo", {}, [n.inputs[0], g.const(f"{n.name}/shape", np.array(dims, np.int32))])


def _with_axes(op: str) -> Callable[[_Graph, NodeDef], None]:
    def rule(g: _Graph, n: NodeDef) -> None:
        """Squeeze/Unsqueeze: our const axes input as the official `axis` attribute (none: every 1 dropped)."""
        axes = _int32_values(g, n, 1, "axes").tolist() if len(n.inputs) > 1 and n.inputs[1] >= 0 else []
        g.add(n, op, dict(axis=axes), n.inputs[:1])
    return rule


def _layer_norm(g: _Graph, n: NodeDef) -> None:
    """LayerNorm over [axis, rank), gamma and beta over the same axes: LayerNormFusion."""
    axis = n.attrs.axis % max(len(g.tensors[n.inputs[0]].dims), 1)
    g.add(n, "LayerNormFusion", dict(begin_norm_axis=axis, begin_params_axis=axis, epsilon=n.attrs.epsilon,
                                     elementwise_affine=True), n.inputs[:3])


_DEFAULT_GATES = [ours.RnnActivation.SIGMOID, ours.RnnActivation.TANH, ours.RnnActivation.TANH]


def _lstm(g: _Graph, n: NodeDef) -> None:
    """LSTM (ONNX's: x [T, B, I], W [D, 4H, I], R [D, 4H, H], B [D, 8H], h0, c0 [D, B, H]; gates i, o, f, c, as
    the official converter keeps them) -> the official LSTM's six inputs and three outputs; a missing bias or
    initial state becomes zeros, a missing output a tensor of its own."""
    a = n.attrs
    directions = 2 if a.direction == ours.RnnDirection.BIDIRECTIONAL else 1
    gates = list(a.activations) if a.activations is not None else []
    if a.direction == ours.RnnDirection.REVERSE or gates not in ([], _DEFAULT_GATES * directions) or a.clip or \
            a.layout or a.input_forget:
        raise _refuse(n, f"direction {a.direction}, activations {gates}, clip {a.clip}, layout {a.layout}, input "
                         f"forget {a.input_forget}")
    if len(n.inputs) > 4 and n.inputs[4] >= 0:
        raise _refuse(n, "sequence lengths")
    x = g.tensors[n.inputs[0]]
    hidden = a.hidden_size
    if len(x.dims) != 3 or min(x.dims) < 0:
        raise _refuse(n, f"an input of unknown dims {list(x.dims)}")

    def given(k: int, shape: tuple[int, ...], what: str) -> int:
        if len(n.inputs) > k and n.inputs[k] >= 0:
            return n.inputs[k]
        return g.const(f"{n.name}/{what}", np.zeros(shape, np.float32))
    inputs = [*n.inputs[:3], given(3, (directions, 8 * hidden), "bias"),
              given(5, (directions, x.dims[1], hidden), "initial_h"), given(6, (directions, x.dims[1], hidden),
                                                                             "initial_c")]
    outputs = [o if o >= 0 else g.computed(f"{n.name}/output_{k}", n.outputs[0])
               for k, o in enumerate([*n.outputs, -1, -1, -1][:3])]
    g.add(n, "LSTM", dict(bidirectional=directions == 2, has_bias=True, input_size=x.dims[2], hidden_size=hidden,
                          num_layers=1, num_directions=directions), inputs, outputs)


def _softmax(g: _Graph, n: NodeDef) -> None:
    g.add(n, "Softmax", dict(axis=[n.attrs.axis]), n.inputs[:1])


def _attention(g: _Graph, n: NodeDef) -> None:
    """Attention of one head count (Q, K, V 4-D [B, H, S, D], or 3-D [B, S, H * D] split into heads and merged back
    by Reshape and Transpose), with an optional float additive mask: softmax(scale * Q K^T + mask) V as MatMulFusion
    (K transposed), MulFusion by the scale, AddFusion of the mask, Softmax over the keys and MatMulFusion by V."""
    a = n.attrs
    q, k, v = (g.tensors[i] for i in n.inputs[:3])
    mask = n.inputs[3] if len(n.inputs) > 3 and n.inputs[3] >= 0 else None
    heads = a.q_num_heads if len(q.dims) == 3 else q.dims[1] if len(q.dims) == 4 else 0
    if any(len(t.dims) != len(q.dims) or min(t.dims, default=-1) < 0 for t in (q, k, v)) or not heads or \
            a.kv_num_heads not in (0, heads) or (len(q.dims) == 4 and (k.dims[1], v.dims[1]) != (heads, heads)):
        raise _refuse(n, f"query, key and value of dims {list(q.dims)}, {list(k.dims)}, {list(v.dims)} and heads "
                         f"{a.q_num_heads}/{a.kv_num_heads}, not one head count of known dims")
    if any(i >= 0 for i in n.inputs[4:]) or any(o >= 0 for o in n.outputs[1:]) or a.is_causal or a.softcap or \
            (a.left_window_size, a.right_window_size) != (-1, -1) or (mask is not None and
                                                                      g.tensors[mask].data_type != DataType.FLOAT32):
        raise _refuse(n, "a key-value cache, a causal, windowed, softcapped or boolean mask, or outputs besides Y")

    def step(op: str, fields: dict[str, Any], inputs: list[int], dims: Sequence[int], part: str,
             into: int | None = None) -> int:
        """One official node of the chain: its output a new tensor of `dims`, or `into`."""
        out = g.computed(f"{n.name}/{part}", n.outputs[0], dims) if into is None else into
        g.add(n, op, fields, inputs, [out], f"/{part}")
        return out

    def reshaped(i: int, dims: Sequence[int], part: str, into: int | None = None) -> int:
        shape = g.const(f"{n.name}/{part}_shape", np.array(dims, np.int32))
        return step("Reshape", {}, [i, shape], dims, part, into)

    def swapped(i: int, part: str) -> int:
        """Axes 1 and 2 exchanged: [B, S, H, D] <-> [B, H, S, D]."""
        b, x, y, d = g.tensors[i].dims
        perm = g.const(f"{n.name}/{part}_perm", np.array([0, 2, 1, 3], np.int32))
        return step("Transpose", {}, [i, perm], (b, y, x, d), part)

    def heads_first(i: int, what: str) -> int:
        if len(q.dims) == 4:
            return i
        b, s, width = g.tensors[i].dims
        return swapped(reshaped(i, (b, s, heads, width // heads), f"{what}_split"), f"{what}_heads")
    q4, k4, v4 = (heads_first(i, what) for i, what in zip(n.inputs, "qkv"))
    (b, h, s, d), t, dv = g.tensors[q4].dims, g.tensors[k4].dims[2], g.tensors[v4].dims[3]
    plain = dict(activation_type=_A.NO_ACTIVATION)
    scores = step("MatMulFusion", dict(transpose_a=False, transpose_b=True, **plain), [q4, k4], (b, h, s, t),
                  "scores")
    scale = g.const(f"{n.name}/scale", np.array([a.scale or 1.0 / np.sqrt(d)], np.float32))
    scores = step("MulFusion", plain, [scores, scale], (b, h, s, t), "scaled")
    if mask is not None:
        scores = step("AddFusion", plain, [scores, mask], (b, h, s, t), "masked")
    probs = step("Softmax", dict(axis=[3]), [scores], (b, h, s, t), "probs")
    merge = len(q.dims) == 3
    y = step("MatMulFusion", dict(transpose_a=False, transpose_b=False, **plain), [probs, v4], (b, h, s, dv),
             "y_heads", None if merge else n.outputs[0])
    if merge:
        reshaped(swapped(y, "y_merged"), (b, s, h * dv), "y", n.outputs[0])


_OR, _R = ours.ReduceMode, fb.ReduceMode
_REDUCE_MODES = {_OR.MEAN: _R.ReduceMean, _OR.SUM: _R.ReduceSum, _OR.MAX: _R.ReduceMax, _OR.MIN: _R.ReduceMin,
                 _OR.PROD: _R.ReduceProd, _OR.SUM_SQUARE: _R.ReduceSumSquare, _OR.L1: _R.ReduceASum,
                 _OR.L2: _R.ReduceL2}


def _reduce(g: _Graph, n: NodeDef) -> None:
    """Reduce over its const axes (none: every axis, unless that is a no-op) as ReduceFusion with int32 axes."""
    a = n.attrs
    rank = len(g.tensors[n.inputs[0]].dims)
    given = len(n.inputs) > 1 and n.inputs[1] >= 0
    axes = _int32_values(g, n, 1, "axes") if given else np.arange(rank, dtype=np.int32)
    if a.mode not in _REDUCE_MODES or (not given and a.noop_with_empty_axes):
        raise _refuse(n, f"mode {a.mode}, no-op with empty axes {a.noop_with_empty_axes}")
    g.add(n, "ReduceFusion", dict(keep_dims=bool(a.keep_dims), mode=_REDUCE_MODES[a.mode], reduce_to_end=False,
                                  coeff=1.0), [n.inputs[0], g.const(f"{n.name}/axes", axes)])


def _prelu(g: _Graph, n: NodeDef) -> None:
    """PReLU of one shared slope, or one per channel of the last axis: the slope flattened, as the official
    converter writes it. The official kernel takes its channels from the input's format, so a per-channel input
    must be 2-D or NHWC (`_prelu_channels`, once the formats are known)."""
    x, slope = g.tensors[n.inputs[0]], g.tensors[n.inputs[1]]
    size = int(np.prod(slope.dims))
    if slope.data is None or size > 1 and (not x.dims or list(slope.dims[-1:]) != [x.dims[-1]] or
                                           size != x.dims[-1]):
        raise _refuse(n, f"a slope of dims {list(slope.dims)} for an input of {list(x.dims)}, not one shared or one "
                         f"per channel of the last axis")
    g.add(n, "PReLUFusion", dict(channel_shared=size == 1),
          [n.inputs[0], g.const(f"{n.name}/slope", slope.data.reshape(-1))])


def _prelu_channels(g: _Graph) -> None:
    """Refuses a per-channel PReLUFusion whose input the official runtime would not read channels-last."""
    for node in g.nodes:
        x = g.tensors[node.inputs[0]]
        if node.op == "PReLUFusion" and not node.fields["channel_shared"] and \
                not (len(x.dims) == 2 or len(x.dims) == 4 and x.format == _F.NHWC):
            raise NotSupportedError(f"PReLU node '{node.name}': a slope per channel of an input of dims "
                                    f"{list(x.dims)} not laid out NHWC, which MindSpore Lite's format cannot express")


_PADDINGS = {ours.PaddingFill.CONSTANT: fb.PaddingMode.CONSTANT, ours.PaddingFill.REFLECT: fb.PaddingMode.REFLECT}


def _pad(g: _Graph, n: NodeDef) -> None:
    """Pad of every axis (our pads begins then ends) as PadFusion's [rank, 2] (begin, end) pairs input, the
    constant value its attribute."""
    value = n.inputs[2] if len(n.inputs) > 2 and n.inputs[2] >= 0 else None
    if n.attrs.mode not in _PADDINGS or (len(n.inputs) > 3 and n.inputs[3] >= 0) or \
            (value is not None and g.tensors[value].data is None):
        raise _refuse(n, f"padding mode {n.attrs.mode}, axes, or a padding value computed at run time")
    pads = _int32_values(g, n, 1, "pads")
    pairs = np.stack([pads[:pads.size // 2], pads[pads.size // 2:]], axis=1)
    fill = float(g.tensors[value].data.reshape(-1)[0]) if value is not None else 0.0
    g.add(n, "PadFusion", dict(padding_mode=_PADDINGS[n.attrs.mode], constant_value=fill),
          [n.inputs[0], g.const(f"{n.name}/paddings", pairs)])


def _split(g: _Graph, n: NodeDef) -> None:
    """Split along one axis into its outputs' known sizes (the official `size_splits`)."""
    rank = len(g.tensors[n.inputs[0]].dims)
    axis = n.attrs.axis % max(rank, 1)
    sizes = [g.tensors[o].dims[axis] if len(g.tensors[o].dims) == rank else -1 for o in n.outputs]
    if min(sizes, default=-1) < 0:
        raise _refuse(n, "outputs of unknown sizes")
    g.add(n, "Split", dict(output_num=len(sizes), size_splits=sizes, axis=axis), n.inputs[:1])


def _tile(g: _Graph, n: NodeDef) -> None:
    """Tile by const repeats, one per axis: TileFusion over every axis, the repeats an int32 input."""
    repeats = _int32_values(g, n, 1, "repeats")
    g.add(n, "TileFusion", dict(dims=list(range(repeats.size))), [n.inputs[0], g.const(f"{n.name}/repeats",
                                                                                       repeats)])


_CASTS = {DataType.FLOAT32, DataType.INT32}     # what the official Cast kernel converts between, both ways


def _cast(g: _Graph, n: NodeDef) -> None:
    """Cast between float32 and int32 (int64, which official files hold as int32, counting as int32): Cast with
    the target type an int32 const input."""
    narrow = {DataType.INT64: DataType.INT32}
    source, target = (narrow.get(t, t) for t in (g.tensors[n.inputs[0]].data_type, n.attrs.to))
    if not {source, target} <= _CASTS:
        raise _refuse(n, f"a cast from type {source} to {target}")
    g.tensors[n.outputs[0]].data_type = target
    g.add(n, "Cast", {}, [n.inputs[0], g.const(f"{n.name}/to", np.array([target], np.int32))])


def _narrowed(g: _Graph, index: int) -> int:
    """A computed tensor's type as official files hold it (int64 as int32), set on the tensor."""
    t = g.tensors[index]
    t.data_type = DataType.INT32 if t.data_type == DataType.INT64 else t.data_type
    return t.data_type


def _shape(g: _Graph, n: NodeDef) -> None:
    """Shape of the whole input, int32 (ours are int64)."""
    if n.attrs.start != 0 or n.attrs.end < len(g.tensors[n.inputs[0]].dims):
        raise _refuse(n, f"dims {n.attrs.start} to {n.attrs.end} only")
    _narrowed(g, n.outputs[0])
    g.add(n, "Shape", {}, n.inputs[:1])


def _constant_of_shape(g: _Graph, n: NodeDef) -> None:
    """ConstantOfShape of float32 or int32 (int64: int32) values."""
    data_type = _narrowed(g, n.outputs[0])
    if data_type not in _CASTS:
        raise _refuse(n, f"values of type {data_type}")
    g.add(n, "ConstantOfShape", dict(data_type=data_type, value=np.array([n.attrs.value], np.float32)),
          n.inputs[:1])


def _range(g: _Graph, n: NodeDef) -> None:
    """Range of float32 or int32 (int64: int32) scalars start, limit, delta, as three inputs."""
    d_type = _narrowed(g, n.outputs[0])
    if d_type not in _CASTS:
        raise _refuse(n, f"values of type {d_type}")
    g.add(n, "Range", dict(d_type=d_type), n.inputs[:3])


def _non_max_suppression(g: _Graph, n: NodeDef) -> None:
    """NonMaxSuppression of its five inputs (the limits int32 consts), its selected [box, class, index] int32."""
    _narrowed(g, n.outputs[0])
    g.add(n, "NonMaxSuppression", dict(center_point_box=n.attrs.center_point_box), [i for i in n.inputs if i >= 0])


_UM = ours.UnaryMathMode
# Not Cos: the 2.0.0 runtime's is off by up to 7.8e-4 of the range on [-3.9, 3.6].
_UNARY_MATH = {_UM.FLOOR: "Floor", _UM.CEIL: "Ceil", _UM.ROUND: "Round", _UM.RECIPROCAL: "Reciprocal", _UM.SIN: "Sin"}


def _unary_math(g: _Graph, n: NodeDef) -> None:
    if n.attrs.mode not in _UNARY_MATH:
        raise _refuse(n, f"mode {n.attrs.mode}")
    g.add(n, _UNARY_MATH[n.attrs.mode], {}, n.inputs[:1])


_CM = ours.CompareMode
_COMPARISONS = {_CM.EQUAL: "Equal", _CM.GREATER: "Greater", _CM.GREATER_EQUAL: "GreaterEqual", _CM.LESS: "Less",
                _CM.LESS_EQUAL: "LessEqual"}


def _compare(g: _Graph, n: NodeDef) -> None:
    g.add(n, _COMPARISONS[n.attrs.mode], {}, n.inputs[:2])


_ACTIVATIONS: dict[int, Callable[[Any], dict[str, Any]]] = {  # ours -> the official Activation's fields
    _OA.LEAKY_RELU: lambda a: dict(activation_type=_A.LEAKY_RELU, alpha=a.alpha),
    _OA.ELU: lambda a: dict(activation_type=_A.ELU, alpha=a.alpha),
    _OA.HARD_TANH: lambda a: dict(activation_type=_A.HARD_TANH, min_val=a.min_val, max_val=a.max_val),
    _OA.GELU: lambda a: dict(activation_type=_A.GELU, approximate=False),
    _OA.GELU_TANH: lambda a: dict(activation_type=_A.GELU, approximate=True),
}


def _activation_op(g: _Graph, n: NodeDef) -> None:
    a = n.attrs
    if a.type in _PLAIN - {_OA.NO_ACTIVATION}:
        fields = dict(activation_type=a.type)
    elif a.type == _OA.HSIGMOID and np.isclose(a.alpha, 1 / 6) and np.isclose(a.beta, 0.5):
        fields = dict(activation_type=_A.HSIGMOID)
    elif a.type in _ACTIVATIONS:
        fields = _ACTIVATIONS[a.type](a)
    else:
        raise _refuse(n, f"activation type {a.type}")
    g.add(n, "Activation", fields, n.inputs[:1])


_RULES: dict[str, Callable[[_Graph, NodeDef], None]] = {
    "Conv2D": _conv,
    "Conv2DTranspose": _conv_transpose,
    "Pooling": _pool,
    "FullConnection": _full_connection,
    "MatMul": _matmul,
    "Add": _fused("AddFusion"),
    "Sub": _fused("SubFusion"),
    "Mul": _fused("MulFusion"),
    "Div": _fused("DivFusion"),
    "Maximum": _plain("Maximum"),
    "Minimum": _plain("Minimum"),
    "Activation": _activation_op,
    "Transpose": _transpose,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Concat": lambda g, n: g.add(n, "Concat", dict(axis=n.attrs.axis), n.inputs),
    "Softmax": _softmax,
    "LRN": _lrn,
    "GroupNorm": _group_norm,
    "Resize": _resize,
    "ArgMinMax": _arg_min_max,
    "Slice": _slice,
    "Gather": _gather,
    "GatherElements": _gather_elements,
    "Expand": _expand,
    "LSTM": _lstm,
    **{op: _plain(op) for op in ("Abs", "Sqrt", "Neg", "Log", "Erf")},
    "UnaryMath": _unary_math,
    "TopK": _top_k,
    "Compare": _compare,
    "Where": _plain("Where"),
    "PReLU": _prelu,
    "Pad": _pad,
    "Split": _split,
    "Tile": _tile,
    "Cast": _cast,
    "Shape": _shape,
    "ConstantOfShape": _constant_of_shape,
    "Range": _range,
    "NonMaxSuppression": _non_max_suppression,
    "Exp": lambda g, n: g.add(n, "ExpFusion", dict(base=-1.0, scale=1.0, shift=0.0), n.inputs[:1]),
    "Pow": lambda g, n: g.add(n, "PowFusion", dict(scale=1.0, shift=0.0), n.inputs[:2]),
    "Squeeze": _with_axes("Squeeze"),
    "Unsqueeze": _with_axes("Unsqueeze"),
    "LayerNorm": _layer_norm,
    "Attention": _attention,
    "Reduce": _reduce,
    "QuantDTypeCast": lambda g, n: g.add(n, "QuantDTypeCast", dict(src_t=n.attrs.src_t, dst_t=n.attrs.dst_t),
                                         n.inputs[:1]),
}


def _official_tensor(t: TensorDef) -> _Tensor:
    """Our tensor as the official one: int64 consts narrowed to int32 (the official kernels' index type); quant
    params per tensor, or per channel along the first axis (the official weights' output channels)."""
    if len(t.quant_params) > 1 and t.quant_axis != 0:
        raise NotSupportedError(f"tensor '{t.name}' is quantized per channel along axis {t.quant_axis}, but "
                                f"MindSpore Lite's quant params run along the first")
    if t.quant_params and t.data_type != DataType.INT32 and any(q.numBits != 8 for q in t.quant_params):
        raise NotSupportedError(f"tensor '{t.name}' is quantized to {t.quant_params[0].numBits} bits; MindSpore "
                                f"Lite files of ours carry 8-bit tensors")
    data, data_type, beyond = t.data, t.data_type, False     # int64 consts clamped into int32, marked if beyond
    if data is not None and data.dtype == np.int64:
        beyond = bool(data.size and not (_INT32_MIN <= data.min() and data.max() <= _INT32_MAX))
        data, data_type = np.clip(data, _INT32_MIN, _INT32_MAX).astype(np.int32), DataType.INT32
    return _Tensor(t.name, _VALUE_NODE if data is not None else _CNODE, data_type, tuple(t.dims), _F.NCHW, data,
                   list(t.quant_params), beyond)


_NHWC_OPS = {"Conv2DFusion", "Conv2dTransposeFusion", "MaxPoolFusion", "AvgPoolFusion", "Resize", "InstanceNorm",
             "LRN"}


def _formats(g: _Graph, inputs: Sequence[int], nhwc_inputs: set[int]) -> None:
    """Each tensor's `format` as the official converter marks it, which the official runtime reads as the layout of
    the data: graph inputs NHWC when so declared or fed straight to a layout op, else NCHW; 4-D tensors NHWC from
    the layout ops on (and the convolutions' weights), NCHW back after a Transpose to it, other tensors as their
    op's first input."""
    fed = {node.inputs[0] for node in g.nodes if node.op in _NHWC_OPS}
    for i in inputs:
        g.tensors[i].format = _F.NHWC if i in nhwc_inputs or i in fed else _F.NCHW
    for node in g.nodes:
        first = g.tensors[node.inputs[0]].format if node.inputs else _F.NCHW
        if node.op in _NHWC_OPS:
            fmt = _F.NHWC
            for i in node.inputs[1:3]:
                g.tensors[i].format = _F.NHWC
        elif node.op == "Transpose":
            perm = g.tensors[node.inputs[1]].data.tolist()
            fmt = _F.NHWC if perm == _TO_NHWC else _F.NCHW if perm == _TO_NCHW else first
        elif node.op in ("Reshape", "Flatten", "MatMulFusion"):
            fmt = _F.NCHW
        else:
            fmt = first
        for o in node.outputs:
            g.tensors[o].format = fmt


def translate(tensors: Sequence[TensorDef], nodes: Sequence[NodeDef], inputs: Sequence[int]) -> _Graph:
    """Our graph as the official one; `NotSupportedError` for what it cannot hold."""
    g = _Graph([_official_tensor(t) for t in tensors])
    for n in nodes:
        rule = _RULES.get(n.op)
        if rule is None:
            raise NotSupportedError(f"{n.op} node '{n.name}': the op has no MindSpore Lite counterpart")
        if n.quant_type == ours.QuantType.WEIGHT:
            raise NotSupportedError(f"{n.op} node '{n.name}' is weight-quantized, which MindSpore Lite files of "
                                    f"ours do not carry yet")
        if n.rounding.startswith("onnxruntime"):
            raise _refuse(n, "onnxruntime's requantization (a float32 product rounded half to even; the official "
                             "kernels round as nnacl does)")
        rule(g, n)
    for node in g.nodes:
        for i in node.inputs:
            if g.tensors[i].beyond_int32:
                raise NotSupportedError(f"tensor '{g.tensors[i].name}' holds int64 values beyond int32, which "
                                        f"{node.op} node '{node.name}' would read as int32")
    _formats(g, inputs, {i for i in inputs if tensors[i].format == ours.Format.NHWC})
    _prelu_channels(g)
    return g


def _camel(snake: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in snake.rstrip("_").split("_"))


def _attribute_table(builder: flatbuffers.Builder, op: str, fields: dict[str, Any]) -> int:
    """The primitive's table through flatc's builder functions: lists as [long] vectors, numpy arrays as vectors
    of their type, strings, the rest scalars."""
    values = {k: _ints(builder, v, np.int64) if isinstance(v, list) else _ints(builder, v, v.dtype)
              if isinstance(v, np.ndarray) else builder.CreateString(v) if isinstance(v, str) else v
              for k, v in fields.items()}
    getattr(fb, f"{op}Start")(builder)
    for key, value in values.items():
        getattr(fb, f"{op}Add{_camel(key)}")(builder, value)
    return getattr(fb, f"{op}End")(builder)


def _quant_param(builder: flatbuffers.Builder, q: Any) -> int:
    """Ours as the official QuantParam (real = scale * (q - zero_point) in both), marked initialised."""
    fb.QuantParamStart(builder)
    fb.QuantParamAddScale(builder, q.scale)
    fb.QuantParamAddZeroPoint(builder, q.zeroPoint)
    fb.QuantParamAddMin(builder, q.min)
    fb.QuantParamAddMax(builder, q.max)
    fb.QuantParamAddNarrowRange(builder, q.narrowRange)
    fb.QuantParamAddNumBits(builder, q.numBits)
    fb.QuantParamAddInited(builder, True)
    fb.QuantParamAddVarCorr(builder, q.varCorr)
    fb.QuantParamAddMeanCorr(builder, q.meanCorr)
    fb.QuantParamAddDstDtype(builder, q.dstDtype)
    return fb.QuantParamEnd(builder)


def _tensor(builder: flatbuffers.Builder, t: _Tensor) -> int:
    name = builder.CreateString(t.name)
    dims = _ints(builder, t.dims, np.int32)
    data = None
    if t.data is not None:
        data = _aligned_bytes(builder, np.ascontiguousarray(t.data, t.data.dtype.newbyteorder("<")).tobytes())
    quant = _tables(builder, [_quant_param(builder, q) for q in t.quant_params]) if t.quant_params else None
    fb.TensorStart(builder)
    fb.TensorAddNodeType(builder, t.node_type)
    fb.TensorAddDataType(builder, t.data_type)
    fb.TensorAddDims(builder, dims)
    fb.TensorAddFormat(builder, t.format)
    if data is not None:
        fb.TensorAddData(builder, data)
    if quant is not None:
        fb.TensorAddQuantParams(builder, quant)
    fb.TensorAddName(builder, name)
    return fb.TensorEnd(builder)


def _node(builder: flatbuffers.Builder, n: _Node, quantized: bool) -> int:
    table = _attribute_table(builder, n.op, n.fields)
    fb.PrimitiveStart(builder)
    fb.PrimitiveAddValueType(builder, getattr(fb.PrimitiveType, n.op))
    fb.PrimitiveAddValue(builder, table)
    primitive = fb.PrimitiveEnd(builder)
    name, ins, outs = builder.CreateString(n.name), _ints(builder, n.inputs), _ints(builder, n.outputs)
    fb.CNodeStart(builder)
    fb.CNodeAddName(builder, name)
    fb.CNodeAddPrimitive(builder, primitive)
    fb.CNodeAddInputIndex(builder, ins)
    fb.CNodeAddOutputIndex(builder, outs)
    fb.CNodeAddQuantType(builder, fb.QuantType.QUANT_ALL if quantized else fb.QuantType.QUANT_NONE)
    return fb.CNodeEnd(builder)


def write(name: str, tensors: Sequence[TensorDef], nodes: Sequence[NodeDef], inputs: Sequence[int],
          outputs: Sequence[int], subgraphs: Sequence[SubGraphDef] = (), fmk_type: int = FMK_ONNX) -> bytes:
    """A MindSpore Lite `.ms` buffer of one inference graph (`lite.format.mspy.writer.write`'s arguments): training
    parts and control-flow bodies (`subgraphs`) are refused, as the official inference runtime runs neither."""
    if subgraphs:
        raise NotSupportedError(f"model '{name}' has {len(subgraphs)} subgraphs (training parts or control-flow "
                                f"bodies), which MindSpore Lite files of ours do not carry")
    g = translate(tensors, nodes, inputs)
    builder = flatbuffers.Builder(1 << 20)
    tensor_vec = _tables(builder, [_tensor(builder, t) for t in g.tensors])
    node_vec = _tables(builder, [_node(builder, n, any(g.tensors[i].quant_params for i in (*n.inputs, *n.outputs)))
                                 for n in g.nodes])
    sub_name = builder.CreateString(f"{name or 'graph'}_main_graph")
    sub_in, sub_out = _ints(builder, inputs), _ints(builder, outputs)
    members, every = _ints(builder, range(len(g.nodes))), _ints(builder, range(len(g.tensors)))
    fb.SubGraphStart(builder)
    fb.SubGraphAddName(builder, sub_name)
    fb.SubGraphAddInputIndices(builder, sub_in)
    fb.SubGraphAddOutputIndices(builder, sub_out)
    fb.SubGraphAddNodeIndices(builder, members)
    fb.SubGraphAddTensorIndices(builder, every)
    sub_vec = _tables(builder, [fb.SubGraphEnd(builder)])
    name_off = builder.CreateString(name)
    fb.MetaGraphStart(builder)
    fb.MetaGraphAddName(builder, name_off)
    fb.MetaGraphAddFmkType(builder, fmk_type)
    fb.MetaGraphAddInputIndex(builder, sub_in)        # the one subgraph's ends are the graph's
    fb.MetaGraphAddOutputIndex(builder, sub_out)
    fb.MetaGraphAddNodes(builder, node_vec)
    fb.MetaGraphAddAllTensors(builder, tensor_vec)
    fb.MetaGraphAddSubGraph(builder, sub_vec)
    builder.Finish(fb.MetaGraphEnd(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())
