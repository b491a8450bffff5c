"""Reading a verified MindSpore Lite (`MSL2`) buffer: its tensor table as the runtime's `TensorDef`s, its nodes
translated by `ops.translate`, then the checks and ordering every format shares (`lite.format.graph.assemble`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from lite import dtypes
from lite.format.fields import MAX_ELEMENTS, int_vector, packed_values, tensor_header, text
from lite.format.graph import assemble
from lite.format.mindspore_lite.control_flow import CALL_OPS, rebuild
from lite.format.mindspore_lite.ops import Graph, primitive_name, translate
from lite.format.mindspore_lite.residuals import fuse_residuals
from lite.format.mindspore_lite.training import is_training, training_parts, updated_tensors
from lite.format.mindspore_lite.transposes import cancel_transposes
from lite.model import Model, TensorDef
from lite.status import GraphFileError, NotSupportedError
from schema import bitpack
from schema import fb as ours
from schema.mindspore_lite import fb

_FLOAT32_MAX = float(np.finfo(np.float32).max)     # a quant scale the kernels can hold
# The official Format of a tensor -> ours, for what the runtime reports; the data layout itself is fixed by the op
# (Conv2DFusion weights are [out, kh, kw, in / group] whatever the file says).
_FORMATS = {fb.Format.NCHW: ours.Format.NCHW, fb.Format.NHWC: ours.Format.NHWC, fb.Format.KHWC: ours.Format.OHWI}

_VALUE_NODE = 0     # the official Tensor.nodeType of a constant
_COMPRESSIONS = (fb.WeightQuantCompressType.NONE, fb.WeightQuantCompressType.BITPACKING)     # weights read
# Node quant types read (the official -> ours).
_QUANT_TYPES = {fb.QuantType.QUANT_NONE: ours.QuantType.NONE, fb.QuantType.QUANT_WEIGHT: ours.QuantType.WEIGHT,
                fb.QuantType.WeightQuant: ours.QuantType.WEIGHT, fb.QuantType.QUANT_ALL: ours.QuantType.FULL,
                fb.QuantType.PostTraining: ours.QuantType.FULL}




def read(buf: memoryview) -> Model:
    """The model in a verified MSL2 buffer: float, weight-quant (8-bit, 16-bit, bit-packed below 8) and full-quant
    (int8 tensors with their params; the nodes run MindSpore Lite's rounding, `NNACL`) models; otherwise
    compressed weights are refused with `NotSupportedError` naming what. Control flow (calls between subgraphs)
    becomes our If and Loop nodes (`control_flow.py`). A training file (optimizer nodes) gets the subgraphs
    `TrainSession` runs (`training.py`)."""
    root = fb.MetaGraph.GetRootAs(buf, 0)
    graph_in = int_vector(root, "InputIndex")
    inputs = set(graph_in)
    tensors = [_read_tensor(i, root.AllTensors(i), i in inputs) for i in range(root.AllTensorsLength())]
    graph = Graph(tensors)
    graph.variables = updated_tensors(root)
    for i in graph_in:
        graph.check_index(i, "graph input")
    graph_out = int_vector(root, "OutputIndex")
    for i in graph_out:
        graph.check_index(i, "graph output")
    if not graph_out:
        raise GraphFileError("model has no outputs")
    count = root.NodesLength()
    subgraphs = [root.SubGraph(s) for s in range(root.SubGraphLength())]
    spans: dict[int, tuple[int, int]] = {}      # official node -> the range of our nodes it became
    calls: dict[int, tuple[Any, ...]] = {}      # official PartialFusion, Switch and Call nodes (control_flow.py)
    if len(subgraphs) == 1:
        main = root.SubGraph(0)
        members = int_vector(main, "NodeIndices")
        if sorted(members) != list(range(count)):
            raise GraphFileError(f"subgraph '{text(main.Name(), 'subgraph_0')}' lists nodes {members[:8]}... "
                                 f"but the model has {count} nodes")
    for k in range(count):
        node = root.Nodes(k)
        name = text(node.Name(), f"node_{k}")
        if node.QuantType() not in _QUANT_TYPES:
            raise NotSupportedError(f"node '{name}' is quantized (quantType {node.QuantType()}): only float, "
                                    f"weight-quant and full-quant MindSpore Lite files are supported")
        primitive = node.Primitive()
        code = primitive.ValueType() if primitive is not None else 0
        if code == 0 or primitive.Value() is None:
            raise GraphFileError(f"node '{name}' has no op")
        op = primitive_name(code)
        table = getattr(fb, op)()
        value = primitive.Value()
        table.Init(value.Bytes, value.Pos)
        inputs = [graph.check_index(i, f"node '{name}'") for i in int_vector(node, "InputIndex")]
        outputs = [graph.check_index(i, f"node '{name}'") for i in int_vector(node, "OutputIndex")]
        if op in CALL_OPS:
            calls[k] = (name, op, table, inputs, outputs)
            continue
        first = len(graph.nodes)
        translate(graph, name, op, table, inputs, outputs, _QUANT_TYPES[node.QuantType()])
        spans[k] = (first, len(graph.nodes))
    if len(subgraphs) > 1:     # control flow: the graph rewrites below do not look into bodies
        nodes, parts = rebuild(graph.tensors, graph.nodes, spans, calls, subgraphs, graph.check_index)
        return assemble(text(root.Name(), ""), text(root.Version(), ""), graph.tensors, nodes, graph_in,
                        graph_out, parts, buf.obj, root.FmkType())
    if calls:
        raise GraphFileError(f"node '{calls[min(calls)][0]}' is a {calls[min(calls)][1]}, but the model has no "
                             f"subgraph to call")
    nodes = cancel_transposes(graph.tensors, graph.nodes, graph_out)
    if is_training(nodes):      # the backward reads forward tensors a residual fusion would remove
        parts = training_parts(graph.tensors, nodes, graph_in, graph_out)
    else:
        nodes, parts = fuse_residuals(graph.tensors, nodes, graph_out), []
    return assemble(text(root.Name(), ""), text(root.Version(), ""), graph.tensors, nodes, graph_in,
                    graph_out, parts, buf.obj, root.FmkType())


def _read_tensor(index: int, t: Any, graph_input: bool) -> TensorDef:
    name, dims, dtype = tensor_header(index, t)
    if t.QuantClustersLength():
        raise NotSupportedError(f"tensor '{name}' is clustered (quantClusters), which is not supported")
    if t.WeightQuantCompressType() not in _COMPRESSIONS or t.EnableHuffmanCode():
        raise NotSupportedError(f"tensor '{name}' is compressed ({t.WeightQuantCompressType()}): only bit-packed "
                                f"MindSpore Lite weights are supported yet")
    if t.ExternalDataLength():
        raise NotSupportedError(f"tensor '{name}' keeps its data in an external file, which is not supported")
    # A value tensor of no elements (Reduce's "all axes") is a constant too, though it stores no bytes.
    const = not graph_input and (t.DataLength() > 0 or t.NodeType() == _VALUE_NODE and 0 in dims)
    quant = [_quant_param(t.QuantParams(k)) for k in range(t.QuantParamsLength())]
    if not const and dtype.kind == "f":
        # A full-quant file records the range of float activations too (a QuantDTypeCast's float output, the
        # input of an op left in float); our runtime would take them for dynamically quantized inputs.
        quant = []
    if not all(0 < q.scale < _FLOAT32_MAX for q in quant):
        raise GraphFileError(f"tensor '{name}' has a quant scale that is not a positive finite number")
    if t.WeightQuantCompressType() == fb.WeightQuantCompressType.BITPACKING:
        data = _unpacked(name, t, dims, dtype, quant)
    else:
        data = _read_data(name, t, dims, dtype) if const else None
    axis = _channel_axis(name, dims, len(quant)) if const and len(quant) > 1 else 0
    node_type = ours.NodeType.VALUE if const else ours.NodeType.PARAMETER if graph_input else ours.NodeType.CNODE
    return TensorDef(index, name, node_type, t.DataType(), dims, _FORMATS.get(t.Format(), ours.Format.ND), data,
                     quant, axis)


def _unpacked(name: str, t: Any, dims: tuple[int, ...], dtype: np.dtype, quant: list[Any]) -> np.ndarray:
    """Bit-packed int8 weights: `num_bits` per value, least significant bit first, each value stored offset by
    2^(num_bits - 1) (so 4-bit -8..7 is 0..15)."""
    bits = bitpack.low_bits(quant)
    low = packed_values(name, t, dims, dtype, quant).astype(np.int16) & ((1 << bits) - 1)
    return (low - (1 << (bits - 1))).astype(np.int8)


def _quant_param(q: Any) -> ours.QuantParamT:
    """An official QuantParam as ours (real = scale * (q - zero_point)); the rounding fields have no use here."""
    p = ours.QuantParamT()
    p.scale, p.zeroPoint, p.min, p.max, p.numBits = q.Scale(), q.ZeroPoint(), q.Min(), q.Max(), q.NumBits()
    p.narrowRange, p.inited, p.varCorr, p.meanCorr, p.dstDtype = (q.NarrowRange(), q.Inited(), q.VarCorr(),
                                                                  q.MeanCorr(), q.DstDtype())
    return p


def _channel_axis(name: str, dims: tuple[int, ...], channels: int) -> int:
    """The axis per-channel quant params run along: the first (output channels of Conv2DFusion weights and of
    transposed MatMul weights), else the last."""
    if dims and dims[0] == channels:
        return 0
    if dims and dims[-1] == channels:
        return len(dims) - 1
    raise GraphFileError(f"tensor '{name}' has {channels} quant params, but no first or last axis of its dims "
                         f"{list(dims)} has that size")


def _read_data(name: str, t: Any, dims: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A const tensor's values: a view into the mapped buffer, or a copy when the file does not align them."""
    if any(d < 0 for d in dims):
        raise GraphFileError(f"const tensor '{name}' has unknown dims {list(dims)}")
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    if count > MAX_ELEMENTS or count * dtype.itemsize != t.DataLength():
        raise GraphFileError(f"tensor '{name}' holds {t.DataLength()} bytes but dims {list(dims)} of "
                             f"{dtypes.type_name(t.DataType())} need {count * dtype.itemsize}")
    if count == 0:
        return np.zeros(dims, dtype).view()
    raw = t.DataAsNumpy()
    values = raw.view(dtype) if raw.ctypes.data % dtype.itemsize == 0 else raw.copy().view(dtype)
    return values.reshape(dims)
