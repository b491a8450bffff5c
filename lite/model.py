"""`Model.Import`: verify a `.ms` buffer and read it into plain graph definitions with zero-copy weights."""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from lite import dtypes, gc_pause
from lite.protect import unwrap
from lite.rewrites import topological_order
from lite.status import GraphFileError, LiteError, NotSupportedError
from lite.traits import traits
from lite.verify import Part, verify_buffer, verify_control_flow
from schema import FMK_ONNX, NO_TENSOR, bitpack, channel_quant, fb
from schema import attrs as op_attrs

_OP_NAMES = {code: name for name, code in vars(fb.Primitive).items() if not name.startswith("_") and code}
_MAX_ELEMENTS = 1 << 34     # refuse shapes no device could hold instead of attempting the allocation


@dataclass
class TensorDef:
    """A tensor of the flat tensor table. `data` is a read-only view into the model buffer for const tensors."""
    index: int
    name: str
    node_type: int
    data_type: int
    dims: tuple[int, ...]
    format: int
    data: np.ndarray | None = None
    quant_params: list[Any] = field(default_factory=list)
    quant_axis: int = 0
    source_perm: tuple[int, ...] = ()     # restores the source model's layout (e.g. OHWI -> OIHW)

    @property
    def is_const(self) -> bool:
        return self.data is not None


@dataclass
class NodeDef:
    """One op node. `attrs` holds the op's schema fields by name (`attrs.pad_top`); omitted inputs are -1."""
    name: str
    op: str
    attrs: Any
    inputs: list[int]
    outputs: list[int]
    quant_type: int = 0
    bodies: list["SubGraphDef"] = field(default_factory=list)   # a control-flow node's subgraphs, as its op
                                                                # names them (`traits(op).bodies`)


@dataclass
class SubGraphDef:
    """A named part of the graph (a training model has "eval", "gradients" and "optimizer" parts), or the body
    of a control-flow node, which compiles on its own over the tensors of `model`."""
    name: str
    inputs: list[int]
    outputs: list[int]
    nodes: list[NodeDef]     # in execution order
    model: "Model | None" = None    # bodies only: the model whose tensor table they index


class Model:
    """An imported model: its tensors, its main graph's nodes in execution (topological) order, its graph
    inputs/outputs, its named subgraphs (training parts) and the bodies of its control-flow nodes."""

    def __init__(self, name: str, version: str, tensors: list[TensorDef], nodes: list[NodeDef],
                 inputs: list[int], outputs: list[int], subgraphs: dict[str, SubGraphDef] | None = None,
                 buffer: Any = None, fmk_type: int = FMK_ONNX, bodies: list[SubGraphDef] | None = None):
        self.name, self.version, self.fmk_type = name, version, fmk_type
        self.tensors, self.nodes = tensors, nodes
        self.inputs, self.outputs = inputs, outputs
        self.subgraphs = subgraphs or {}
        self.bodies = bodies or []
        for body in self.bodies:
            body.model = self
        self._buffer = buffer    # keeps the mapped bytes alive as long as weight views exist

    @staticmethod
    def Import(model_buf: bytes | bytearray | memoryview | mmap.mmap, size: int | None = None,
               dec_key: str | bytes | None = None) -> "Model":
        """Verify and read a model from a buffer (`size` bytes of it, default all). Weights are not copied, except
        once out of an encrypted model, which needs its key `dec_key` (bytes or hex text; see `lite.protect`)."""
        view = memoryview(model_buf).cast("B")
        if size is not None:
            if not 0 <= size <= len(view):
                raise GraphFileError(f"size {size} does not fit the {len(view)}-byte buffer")
            view = view[:size]
        view = unwrap(view, dec_key)
        with gc_pause.paused():
            verify_buffer(view)
            try:
                return _read(view)
            except LiteError:
                raise
            except (ValueError, TypeError, IndexError, UnicodeDecodeError, OverflowError) as e:
                raise GraphFileError(f"model buffer is inconsistent: {e}") from e

    @staticmethod
    def Load(path: str | os.PathLike, dec_key: str | bytes | None = None) -> "Model":
        """Map a `.ms` file read-only and import it; weights stay views into the mapping (an encrypted file, with
        its key `dec_key`, is decrypted once into memory)."""
        try:
            with open(path, "rb") as f:
                if os.fstat(f.fileno()).st_size == 0:
                    raise GraphFileError(f"model file '{path}' is empty")
                mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as e:
            raise GraphFileError(f"cannot read model file '{path}': {e.strerror}") from e
        return Model.Import(mapped, dec_key=dec_key)

    def Free(self) -> None:
        """Drop the graph definition; sessions already compiled keep what they need."""
        self.tensors, self.nodes, self.subgraphs, self.bodies, self._buffer = [], [], {}, [], None


def _text(value: bytes | None, default: str) -> str:
    return value.decode() if value else default


def _vector(table: Any, field: str) -> list[int]:
    """An integer vector field as a list ([] when absent)."""
    return getattr(table, field + "AsNumpy")().tolist() if getattr(table, field + "Length")() else []


def _read(buf: memoryview) -> Model:
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
        name = _text(node.Name(), f"node_{i}")
        op = _OP_NAMES.get(node.PrimitiveType())
        if op is None:
            raise GraphFileError(f"node '{name}' has no op")
        attrs = op_attrs.read(op, fb.PrimitiveCreator(node.PrimitiveType(), node.Primitive()))
        nodes.append(NodeDef(name, op, attrs, indices(_vector(node, "InputIndex"), f"node '{name}'", True),
                             indices(_vector(node, "OutputIndex"), f"node '{name}'"), node.QuantType()))
    for t, params in implied_bias_params(nodes, tensors).items():
        if not tensors[t].quant_params:
            tensors[t].quant_params = params
    graph_in = indices(_vector(root, "InputIndex"), "graph input")
    graph_out = indices(_vector(root, "OutputIndex"), "graph output")
    if not graph_out:
        raise GraphFileError("model has no outputs")
    parts = []
    for i in range(root.SubGraphsLength()):
        sg = root.SubGraphs(i)
        name = _text(sg.Name(), f"subgraph_{i}")
        members = _vector(sg, "NodeIndices")
        if any(k >= len(nodes) for k in members):
            raise GraphFileError(f"subgraph '{name}' refers to a node beyond the {len(nodes)} of the model")
        parts.append(Part(name, indices(_vector(sg, "InputIndices"), f"subgraph '{name}'"),
                          indices(_vector(sg, "OutputIndices"), f"subgraph '{name}'"), members))
    body_parts, owner = verify_control_flow(nodes, parts, [t.data_type for t in tensors])
    _written_once(nodes, tensors, [*graph_in, *(t for s in body_parts for t in parts[s].inputs)])
    ordered = _topological_order([nd for k, nd in enumerate(nodes) if k not in owner], tensors, graph_in)
    rank = {id(node): k for k, node in enumerate(ordered)}
    subgraphs, bodies = {}, {}
    for s, part in enumerate(parts):
        if s in body_parts:
            bodies[s] = _body(part, [nd for k, nd in enumerate(nodes) if owner.get(k) == s], tensors)
        else:
            subgraphs[part.name] = SubGraphDef(part.name, part.inputs, part.outputs,
                                               sorted((nodes[k] for k in part.members), key=lambda nd: rank[id(nd)]))
    for node in nodes:
        spec = traits(node.op).bodies
        if spec is not None:
            node.bodies = [bodies[int(getattr(node.attrs, a))] for a in spec.attrs]
    version = _text(root.Version(), "")
    return Model(_text(root.Name(), ""), version, tensors, ordered, graph_in, graph_out,
                 subgraphs, buf.obj, _fmk_type(root.FmkType(), version), list(bodies.values()))


def _fmk_type(stored: int, version: str) -> int:
    """The source framework; files before format 1.2 came only from ONNX and wrote 0 for it."""
    before_1_2 = tuple(int(p) for p in version.split(".")[:2] if p.isdigit()) < (1, 2)
    return FMK_ONNX if stored == 0 and before_1_2 else stored


def _body(part: Part, members: list[NodeDef], tensors: list[TensorDef]) -> SubGraphDef:
    """A control-flow body: its nodes ordered over its own inputs, every output made by it (or an input or a
    constant of it)."""
    ordered = _topological_order(members, tensors, part.inputs, f"subgraph '{part.name}'")
    made = {t for nd in members for t in nd.outputs} | set(part.inputs)
    for t in part.outputs:
        if t not in made and not tensors[t].is_const:
            raise GraphFileError(f"subgraph '{part.name}' outputs tensor '{tensors[t].name}', which it does not "
                                 f"produce")
    return SubGraphDef(part.name, part.inputs, part.outputs, ordered)


def _read_tensor(index: int, t: Any) -> TensorDef:
    name = _text(t.Name(), f"tensor_{index}")
    dims = tuple(_vector(t, "Dims"))
    if any(d < -1 for d in dims):
        raise GraphFileError(f"tensor '{name}' has invalid dims {list(dims)}")
    try:
        dtype = dtypes.to_numpy(t.DataType())
    except LiteError as e:
        if dtypes.is_known(t.DataType()):      # a type whose numpy dtype needs ml_dtypes
            raise NotSupportedError(f"tensor '{name}': {e.args[0]}") from None
        raise GraphFileError(f"tensor '{name}' has unknown data type {t.DataType()}") from None
    const = t.NodeType() == fb.NodeType.VALUE
    if const and any(d < 0 for d in dims):
        raise GraphFileError(f"const tensor '{name}' has unknown dims {list(dims)}")
    quant = _read_quant(name, t, dims, const)
    data = _read_data(name, t, dims, dtype, quant) if const else None
    perm = tuple(_vector(t, "SourcePerm"))
    if perm and sorted(perm) != list(range(len(dims))):
        raise GraphFileError(f"tensor '{name}' has source_perm {list(perm)}, not a permutation of its dims")
    return TensorDef(index, name, t.NodeType(), t.DataType(), dims, t.Format(), data, quant, t.QuantAxis(), perm)


def _read_data(name: str, t: Any, dims: tuple[int, ...], dtype: np.dtype, quant: list[Any]) -> np.ndarray:
    """A const tensor's values: a view into the mapped buffer, or the unpacked copy of bit-packed weights."""
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    compress = t.WeightQuantCompressType()
    if compress == fb.WeightQuantCompressType.BITPACKING:
        bits = bitpack.low_bits(quant)
        if dtype != np.int8 or bits is None:
            raise GraphFileError(f"tensor '{name}' is bit-packed, but is not int8 with one num_bits below 8 in "
                                 f"its quant params")
        need = bitpack.packed_size(count, bits)
        if count > _MAX_ELEMENTS or need != t.DataLength():
            raise GraphFileError(f"tensor '{name}' holds {t.DataLength()} bytes but dims {list(dims)} of "
                                 f"{bits}-bit packed values need {need}")
        return bitpack.unpack(t.DataAsNumpy(), bits, count).reshape(dims)
    if compress != fb.WeightQuantCompressType.NONE:
        raise GraphFileError(f"tensor '{name}' has unknown weight_quant_compress_type {compress}")
    if count > _MAX_ELEMENTS or count * dtype.itemsize != t.DataLength():
        raise GraphFileError(f"tensor '{name}' holds {t.DataLength()} bytes but dims {list(dims)} of "
                             f"{dtypes.type_name(t.DataType())} need {count * dtype.itemsize}")
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


def _written_once(nodes: list[NodeDef], tensors: list[TensorDef], inputs: list[int]) -> None:
    """No tensor is written by two nodes (of any graph), nor is a constant or an input of a graph written."""
    written = set(inputs) | {t.index for t in tensors if t.is_const}
    for node in nodes:
        for t in node.outputs:
            if t in written:
                raise GraphFileError(f"tensor '{tensors[t].name}' is written twice (node '{node.name}')")
            written.add(t)


def _topological_order(nodes: list[NodeDef], tensors: list[TensorDef], inputs: list[int],
                       graph: str = "the graph") -> list[NodeDef]:
    """Nodes in an order where every input is ready before use; rejects cycles and dangling inputs (a body
    node reading a tensor of another graph, too)."""
    producer = {t: i for i, node in enumerate(nodes) for t in node.outputs}
    ready = {t.index for t in tensors if t.is_const} | set(inputs)
    pending = {i: {t for t in n.inputs if t >= 0 and t not in ready} for i, n in enumerate(nodes)}
    for i, node in enumerate(nodes):
        for t in pending[i]:
            if t not in producer:
                raise GraphFileError(f"node '{node.name}' reads tensor '{tensors[t].name}', which nothing in "
                                     f"{graph} produces")
    order = topological_order(list(pending.values()), [n.outputs for n in nodes])
    if len(order) != len(nodes):
        placed = set(order)
        stuck = next(nodes[i].name for i in pending if i not in placed)
        raise GraphFileError(f"{graph} has a cycle through node '{stuck}'")
    return [nodes[i] for i in order]
