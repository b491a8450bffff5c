"""Reading a verified `.ms` buffer of our format into the runtime's graph, weights as zero-copy views."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lite import dtypes
from lite.format.fields import MAX_ELEMENTS, int_vector, packed_values, tensor_header, text
from lite.format.graph import Part, assemble
from lite.model import Model, NodeDef, TensorDef
from lite.status import GraphFileError
from lite.traits import traits
from schema import FMK_ONNX, NO_TENSOR, channel_quant, fb
from schema import attrs as op_attrs

# fb.Rounding by value: `NodeDef.rounding`'s names (lite/kernels/int8/requantize.py), lower case
ROUNDINGS = {value: name.lower() for name, value in vars(fb.Rounding).items() if name.isupper()}

_OP_NAMES = {code: name for name, code in vars(fb.Primitive).items() if not name.startswith("_") and code}




def read(buf: memoryview) -> Model:
    """The model in a verified buffer; const tensors are read-only views into it (bit-packed weights are
    unpacked)."""
    root = fb.MetaGraph.GetRootAs(buf, 0)
    tensors = [_read_tensor(i, root.AllTensors(i)) for i in range(root.AllTensorsLength())]
    n = len(tensors)

    def indices(values: list[int], where: str, optional: bool = False) -> list[int]:
        for v in values:
            if v >= n and not (optional and v == NO_TENSOR):
                raise GraphFileError(f"{where} refers to tensor {v}, but the model has {n} tensors")
        return [-1 if v == NO_TENSOR else v for v in values]

    nodes = []
    for i in range(root.NodesLength()):
        node = root.Nodes(i)
        name = text(node.Name(), f"node_{i}")
        op = _OP_NAMES.get(node.PrimitiveType())
        if op is None:
            raise GraphFileError(f"node '{name}' has no op")
        attrs = op_attrs.read(op, fb.PrimitiveCreator(node.PrimitiveType(), node.Primitive()))
        rounding = ROUNDINGS.get(node.Rounding())
        if rounding is None:
            raise GraphFileError(f"node '{name}' has an unknown rounding {node.Rounding()}")
        nodes.append(NodeDef(name, op, attrs, indices(int_vector(node, "InputIndex"), f"node '{name}'", True),
                             indices(int_vector(node, "OutputIndex"), f"node '{name}'"), node.QuantType(),
                             rounding=rounding))
    for t, params in implied_bias_params(nodes, tensors).items():
        if not tensors[t].quant_params:
            tensors[t].quant_params = params
    graph_in = indices(int_vector(root, "InputIndex"), "graph input")
    graph_out = indices(int_vector(root, "OutputIndex"), "graph output")
    if not graph_out:
        raise GraphFileError("model has no outputs")
    parts = []
    for i in range(root.SubGraphsLength()):
        sg = root.SubGraphs(i)
        name = text(sg.Name(), f"subgraph_{i}")
        members = int_vector(sg, "NodeIndices")
        if any(k >= len(nodes) for k in members):
            raise GraphFileError(f"subgraph '{name}' refers to a node beyond the {len(nodes)} of the model")
        parts.append(Part(name, indices(int_vector(sg, "InputIndices"), f"subgraph '{name}'"),
                          indices(int_vector(sg, "OutputIndices"), f"subgraph '{name}'"), members))
    version = text(root.Version(), "")
    return assemble(text(root.Name(), ""), version, tensors, nodes, graph_in, graph_out, parts, buf.obj,
                    _fmk_type(root.FmkType(), version))


def _fmk_type(stored: int, version: str) -> int:
    """The source framework; files before format 1.2 came only from ONNX and wrote 0 for it."""
    before_1_2 = tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (1, 2)
    return FMK_ONNX if stored == 0 and before_1_2 else stored


def _read_tensor(index: int, t: Any) -> TensorDef:
    name, dims, dtype = tensor_header(index, t)
    const = t.NodeType() == fb.NodeType.VALUE
    if const and any(d < 0 for d in dims):
        raise GraphFileError(f"const tensor '{name}' has unknown dims {list(dims)}")
    quant = _read_quant(name, t, dims, const)
    data = _read_data(name, t, dims, dtype, quant) if const else None
    perm = tuple(int_vector(t, "SourcePerm"))
    if perm and sorted(perm) != list(range(len(dims))):
        raise GraphFileError(f"tensor '{name}' has source_perm {list(perm)}, not a permutation of its dims")
    dim_names = tuple(text(t.DimNames(j), "") for j in range(t.DimNamesLength()))
    if dim_names and len(dim_names) != len(dims):
        raise GraphFileError(f"tensor '{name}' names {len(dim_names)} dims, but has {len(dims)}")
    return TensorDef(index, name, t.NodeType(), t.DataType(), dims, t.Format(), data, quant, t.QuantAxis(), perm,
                     dim_names)


def _read_data(name: str, t: Any, dims: tuple[int, ...], dtype: np.dtype, quant: list[Any]) -> np.ndarray:
    """A const tensor's values: a view into the mapped buffer, or the unpacked copy of bit-packed weights."""
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    compress = t.WeightQuantCompressType()
    if compress == fb.WeightQuantCompressType.BITPACKING:
        return packed_values(name, t, dims, dtype, quant)
    if compress != fb.WeightQuantCompressType.NONE:
        raise GraphFileError(f"tensor '{name}' has unknown weight_quant_compress_type {compress}")
    if count > MAX_ELEMENTS or count * dtype.itemsize != t.DataLength():
        raise GraphFileError(f"tensor '{name}' holds {t.DataLength()} bytes but dims {list(dims)} of "
                             f"{dtypes.type_name(t.DataType())} need {count * dtype.itemsize}")
    if count == 0:                     # no data vector at all: flatbuffers answers 0, not an empty array
        return np.zeros(dims, dtype)
    return t.DataAsNumpy().view(dtype).reshape(dims)   # a view into the mapped buffer, never a copy


def _read_quant(name: str, t: Any, dims: tuple[int, ...], const: bool) -> list[Any]:
    """One QuantParamT per tensor or per channel, from either file form (`ChannelQuant` or, as format 1.0
    wrote them, one table per channel)."""
    tables = [fb.QuantParamT.InitFromObj(t.QuantParams(i)) for i in range(t.QuantParamsLength())]
    compact = t.ChannelQuant()
    if compact is None:
        return tables
    if tables:
        raise GraphFileError(f"tensor '{name}' has both per-tensor and per-channel quantization")
    try:
        params = channel_quant.expand(compact)
    except ValueError as e:
        raise GraphFileError(f"tensor '{name}': {e}") from None
    axis = t.QuantAxis()
    if const and not (0 <= axis < len(dims) and dims[axis] == len(params)):
        raise GraphFileError(f"tensor '{name}' has {len(params)} channel quant params, but its dims "
                             f"{list(dims)} have no axis {axis} of that size")
    return params


def implied_bias_params(nodes: Sequence[NodeDef], tensors: Sequence[TensorDef]) -> dict[int, list[Any]]:
    """Tensor index -> quant params of each INT32 bias of an int8 op with a weight and a bias input (Conv2D,
    FullConnection: `traits(op)`) and per-channel weights: the writer leaves them out when they are these, and
    the reader restores them (`channel_quant.implied_bias`)."""
    implied: dict[int, list[Any]] = {}
    conflicting: set[int] = set()
    for node in nodes:
        t = traits(node.op)
        if t.weight_input is None or t.bias_input is None:
            continue
        roles = (0, t.weight_input, t.bias_input)
        if len(node.inputs) <= max(roles) or min(node.inputs[k] for k in roles) < 0:
            continue
        x, w, b = (tensors[node.inputs[k]] for k in roles)
        params = (channel_quant.implied_bias(x.quant_params, w.quant_params)
                  if b.data_type == dtypes.DataType.INT32 else None)
        if params is None:
            continue
        if b.index in implied and not channel_quant.same(implied[b.index], params):
            conflicting.add(b.index)
        implied.setdefault(b.index, params)
    return {t: params for t, params in implied.items() if t not in conflicting}
