"""Read a `.tflite` flatbuffer (schema version 3) into plain records before any rule looks at it.

Python FlatBuffers has no verifier and reads lazily, so a truncated or corrupted file would fail at some random
access deep inside a rule. Here every table the importer needs (operator codes, tensors, buffers, operators with
their options, signature defs) is read eagerly in one guarded pass: any failure is a `GraphFileError` naming the
file and what could not be read, and no rule ever touches the raw buffer. Vector lengths are bounded by the
file size first, so garbage cannot ask for a giant allocation or a long loop.
"""
from __future__ import annotations

import importlib
import inspect
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tflite

from converter.frontends.tflite.sparse import Sparsity, densify
from lite.status import GraphFileError, InputTensorError

SCHEMA_VERSION = 3
IDENTIFIER = b"TFL3"
CUSTOM = tflite.BuiltinOperator.CUSTOM

_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
def builtin_names() -> list[str]:
    """Every builtin operator the schema names."""
    return sorted(_NAMES.values())


_OPTIONS = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
_OPTIONS2 = {v: k for k, v in vars(tflite.BuiltinOptions2).items() if not k.startswith("_")}
DTYPES = {
    tflite.TensorType.FLOAT32: np.float32, tflite.TensorType.FLOAT16: np.float16, tflite.TensorType.FLOAT64: np.float64,
    tflite.TensorType.INT8: np.int8, tflite.TensorType.UINT8: np.uint8, tflite.TensorType.INT16: np.int16,
    tflite.TensorType.UINT16: np.uint16, tflite.TensorType.INT32: np.int32, tflite.TensorType.UINT32: np.uint32,
    tflite.TensorType.INT64: np.int64, tflite.TensorType.BOOL: np.bool_,
}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
OPAQUE = np.dtype(object)    # the dtype of a tensor whose type has no array here (RESOURCE, STRING, VARIANT, INT4, ...)


@dataclass
class Quantization:
    """real = scale * (q - zero_point), per tensor (one value) or per channel along `axis`."""
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


@dataclass
class TensorRecord:
    index: int
    name: str
    shape: tuple[int, ...]           # -1 where shape_signature marks a dim unknown until run time
    dtype: np.dtype
    data: np.ndarray | None          # constants only, dense (sparse constants are densified here)
    quant: Quantization | None
    sparse: bool = False
    variable: bool = False           # state an op keeps across invocations (LSTM's), zeros when first read
    type_name: str = ""              # the schema's name of the type ("FLOAT32", "RESOURCE", ...)

    @property
    def opaque(self) -> bool:
        """A type the runtime holds no array of (RESOURCE, STRING, ...): the importer refuses the ops using it."""
        return self.dtype == OPAQUE


@dataclass
class OperatorRecord:
    index: int
    op: str                          # builtin name ("CONV_2D"), or "CUSTOM:<custom_code>"
    version: int
    inputs: list[int]                # -1 marks an omitted optional input
    outputs: list[int]
    options: dict[str, Any] = field(default_factory=dict)
    custom_options: bytes = b""      # a custom op's options, in the op's own encoding (a C struct, a flexbuffer)


@dataclass
class GraphRecord:
    """One subgraph: subgraph 0 is the main graph, the others are bodies of WHILE / IF operators."""
    tensors: list[TensorRecord]
    operators: list[OperatorRecord]
    inputs: list[int]
    outputs: list[int]
    name: str = ""


@dataclass
class Signature:
    """A signature def: an entry point (`key`, LiteRT's `get_signature_runner(key)`) running one subgraph, its
    inputs and outputs by name (name -> tensor index of that subgraph), in the file's order."""
    key: str
    subgraph: int
    inputs: dict[str, int]
    outputs: dict[str, int]

    @property
    def names(self) -> dict[int, str]:
        """Tensor index -> signature name, of every input and output."""
        return {i: n for n, i in (*self.inputs.items(), *self.outputs.items())}


@dataclass
class ModelRecord(GraphRecord):
    """The file: subgraph 0's records, every subgraph in `graphs` (by subgraph index)."""
    version: int = SCHEMA_VERSION
    names: dict[int, str] = field(default_factory=dict)   # tensor index -> signature-def name of graph inputs/outputs
    graphs: list[GraphRecord] = field(default_factory=list)
    signatures: list[Signature] = field(default_factory=list)

    def signature(self, key: str) -> Signature:
        found = next((s for s in self.signatures if s.key == key), None)
        if found is None:
            raise InputTensorError(f"the model has no signature '{key}' (signatures: "
                                   f"{[s.key for s in self.signatures]})")
        return found

    @property
    def subgraphs(self) -> int:
        return len(self.graphs)


class _Bounded:
    """Vector lengths checked against the file size before they are used."""

    def __init__(self, size: int):
        self.size = size

    def count(self, n: int, what: str, itemsize: int = 4) -> int:
        if not 0 <= n <= self.size // itemsize:
            raise GraphFileError(f"{what} claims {n} entries in a {self.size}-byte file")
        return n


def read_options(table: Any, class_name: str) -> dict[str, Any]:
    """Every scalar and vector field of an options table (`StrideW`, `SqueezeDims`, ...) as Python values."""
    cls = getattr(importlib.import_module(f"tflite.{class_name}"), class_name)
    options = cls()
    options.Init(table.Bytes, table.Pos)
    values: dict[str, Any] = {}
    for name, method in inspect.getmembers(options, inspect.ismethod):
        if (name.startswith(("_", "GetRootAs")) or name.endswith(("IsNone", "Length", "BufferHasIdentifier"))
                or inspect.signature(method).parameters):       # (Init takes parameters: InitSubgraphIndex stays)
            continue
        value = method()
        if name.endswith("AsNumpy"):
            name, value = name[:-len("AsNumpy")], value if isinstance(value, np.ndarray) else np.zeros(0, np.int32)
        values[name] = value.decode() if isinstance(value, bytes) else value
    return values


def _operator_name(code: Any) -> str:
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == CUSTOM:
        return f"CUSTOM:{(code.CustomCode() or b'').decode(errors='replace')}"
    return _NAMES.get(builtin, f"BUILTIN_{builtin}")


def _vector(method_owner: Any, name: str) -> np.ndarray:
    value = getattr(method_owner, f"{name}AsNumpy")()
    return value if isinstance(value, np.ndarray) else np.zeros(0, np.int64)


def _quantization(tensor: Any) -> Quantization | None:
    q = tensor.Quantization()
    if q is None:
        return None
    scale, zero_point = _vector(q, "Scale"), _vector(q, "ZeroPoint")
    if scale.size == 0:
        return None
    if zero_point.size == 0:
        zero_point = np.zeros(scale.size, np.int64)
    if zero_point.size != scale.size:
        raise GraphFileError(f"tensor '{tensor.Name().decode(errors='replace')}' has {scale.size} scales and "
                             f"{zero_point.size} zero points")
    return Quantization(scale.astype(np.float64), zero_point.astype(np.int64), q.QuantizedDimension())


def _buffer_bytes(model: Any, index: int, data: bytes, bounded: _Bounded) -> np.ndarray | None:
    buffer = model.Buffers(index)
    if buffer.Offset() > 1:                               # large models keep buffers after the flatbuffer
        start, size = buffer.Offset(), buffer.Size()
        if start + size > len(data):
            raise GraphFileError(f"buffer {index} ends at byte {start + size}, past the end of the file")
        return np.frombuffer(data, np.uint8, size, start)
    if bounded.count(buffer.DataLength(), f"buffer {index}", 1) == 0:
        return None
    return buffer.DataAsNumpy()


def _sparsity(sp: Any, bounded: _Bounded) -> Sparsity:
    levels = []
    for i in range(bounded.count(sp.DimMetadataLength(), "sparsity dim_metadata")):
        dm = sp.DimMetadata(i)
        segments = indices = None
        if dm.Format() == tflite.DimensionType.SPARSE_CSR:
            segments, indices = (_index_vector(t(), kind()) for t, kind in (
                (dm.ArraySegments, dm.ArraySegmentsType), (dm.ArrayIndices, dm.ArrayIndicesType)))
        levels.append((int(dm.DenseSize()), segments, indices))
    return Sparsity(tuple(int(d) for d in _vector(sp, "TraversalOrder")), tuple(int(d) for d in _vector(sp, "BlockMap")),
                    levels)


def _index_vector(table: Any, kind: int) -> np.ndarray:
    names = {tflite.SparseIndexVector.Int32Vector: "Int32Vector", tflite.SparseIndexVector.Uint16Vector:
             "Uint16Vector", tflite.SparseIndexVector.Uint8Vector: "Uint8Vector"}
    if kind not in names or table is None:
        raise GraphFileError(f"sparse index vector of unknown type {kind}")
    cls = getattr(tflite, names[kind])
    vector = cls()
    vector.Init(table.Bytes, table.Pos)
    return _vector(vector, "Values").astype(np.int64)


def _tensor(model: Any, t: Any, index: int, data: bytes, bounded: _Bounded) -> TensorRecord:
    """A tensor of any type the schema defines; types without an array here are opaque (no data read). A
    constant holding no element (a 0-element shape `[]`) is stored with an empty buffer: it is an empty constant
    when its shape is fully known, not a tensor waiting for a producer (an operator writing it overrides it)."""
    name = (t.Name() or b"").decode(errors="replace") or f"tensor_{index}"
    type_name = _TYPE_NAMES.get(t.Type(), f"TYPE_{t.Type()}")
    dtype = np.dtype(DTYPES[t.Type()]) if t.Type() in DTYPES else OPAQUE
    shape = tuple(int(d) for d in _vector(t, "Shape"))
    signature = tuple(int(d) for d in _vector(t, "ShapeSignature"))
    if len(signature) == len(shape):
        shape = tuple(-1 if s < 0 else d for d, s in zip(shape, signature))
    if not 0 <= t.Buffer() < model.BuffersLength():
        raise GraphFileError(f"tensor '{name}' refers to buffer {t.Buffer()} of {model.BuffersLength()}")
    record = TensorRecord(index, name, shape, dtype, None, _quantization(t), t.Sparsity() is not None,
                          bool(t.IsVariable()), type_name)
    if record.opaque:
        return record
    raw = _buffer_bytes(model, t.Buffer(), data, bounded)
    if raw is None:
        if t.Buffer() > 0 and 0 in shape and min(shape) >= 0 and not record.variable:
            record.data = np.zeros(shape, dtype)
    elif record.sparse:
        values = np.frombuffer(raw.tobytes(), dtype)
        record.data = densify(values, shape, _sparsity(t.Sparsity(), bounded), name)
    else:
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if min(shape, default=0) < 0 or raw.size != expected:
            raise GraphFileError(f"tensor '{name}' has {raw.size} bytes of data for shape {list(shape)} "
                                 f"{dtype} ({expected} bytes)")
        record.data = np.frombuffer(raw.tobytes(), dtype).reshape(shape)
    return record


def _operator(op: Any, index: int, codes: list[tuple[str, int]], bounded: _Bounded) -> OperatorRecord:
    code = op.OpcodeIndex()
    if not 0 <= code < len(codes):
        raise GraphFileError(f"operator {index} uses operator code {code} of {len(codes)}")
    options: dict[str, Any] = {}
    for kinds, table, which in ((_OPTIONS, op.BuiltinOptions(), op.BuiltinOptionsType()),
                                (_OPTIONS2, op.BuiltinOptions2(), op.BuiltinOptions2Type())):
        if table is not None and which in kinds and kinds[which] != "NONE":
            options.update(read_options(table, kinds[which]))
    bounded.count(op.InputsLength(), f"operator {index} inputs")
    bounded.count(op.OutputsLength(), f"operator {index} outputs")
    bounded.count(op.CustomOptionsLength(), f"operator {index} custom options", 1)
    return OperatorRecord(index, *codes[code], [int(i) for i in _vector(op, "Inputs")],
                          [int(i) for i in _vector(op, "Outputs")], options, _vector(op, "CustomOptions").tobytes())


def _graph(model: Any, graph: Any, k: int, codes: list[tuple[str, int]], data: bytes, bounded: _Bounded) -> GraphRecord:
    where = f"subgraph {k}: " if k else ""
    try:
        tensors = [_tensor(model, graph.Tensors(i), i, data, bounded)
                   for i in range(bounded.count(graph.TensorsLength(), "tensors"))]
        operators = [_operator(graph.Operators(i), i, codes, bounded)
                     for i in range(bounded.count(graph.OperatorsLength(), "operators"))]
    except GraphFileError as e:
        raise GraphFileError(where + e.args[0]) from None
    for op in operators:
        if any(not -1 <= t < len(tensors) for t in (*op.inputs, *op.outputs)):
            raise GraphFileError(f"{where}operator {op.index} ({op.op}) refers to a tensor index out of range")
    inputs, outputs = ([int(i) for i in _vector(graph, n)] for n in ("Inputs", "Outputs"))
    if any(not 0 <= t < len(tensors) for t in (*inputs, *outputs)):
        raise GraphFileError(f"{where}a graph input or output index is out of range")
    return GraphRecord(tensors, operators, inputs, outputs, (graph.Name() or b"").decode(errors="replace"))


def _signatures(model: Any, graphs: list[GraphRecord], bounded: _Bounded) -> list[Signature]:
    signatures = []
    for k in range(bounded.count(model.SignatureDefsLength(), "signature defs")):
        sig = model.SignatureDefs(k)
        key = (sig.SignatureKey() or b"").decode(errors="replace") or f"signature_{k}"
        if not 0 <= sig.SubgraphIndex() < len(graphs):
            raise GraphFileError(f"signature '{key}' runs subgraph {sig.SubgraphIndex()} of {len(graphs)}")
        tensors = len(graphs[sig.SubgraphIndex()].tensors)
        maps = []
        for get, n in ((sig.Inputs, sig.InputsLength()), (sig.Outputs, sig.OutputsLength())):
            entries = {(get(j).Name() or b"").decode(errors="replace"): get(j).TensorIndex()
                       for j in range(bounded.count(n, "signature tensors"))}
            if any(not 0 <= i < tensors for i in entries.values()):
                raise GraphFileError(f"signature '{key}' names a tensor index out of range")
            maps.append(entries)
        signatures.append(Signature(key, sig.SubgraphIndex(), *maps))
    return signatures


def _check_header(data: bytes, source: str) -> Any:
    if len(data) < 8:
        raise GraphFileError(f"'{source}' is not a TFLite model: {len(data)} bytes")
    if data[4:8] != IDENTIFIER:
        raise GraphFileError(f"'{source}' is not a TFLite model: file identifier {data[4:8]!r}, expected "
                             f"{IDENTIFIER!r}")
    if struct.unpack_from("<I", data)[0] >= len(data):
        raise GraphFileError(f"'{source}' is truncated: its root table lies past the end of the file")
    return tflite.Model.GetRootAs(data, 0)


def read_model(data: bytes, source: str = "<buffer>") -> ModelRecord:
    """The records of every subgraph of a `.tflite` file (subgraph 0 the main graph, the others WHILE/IF bodies)."""
    bounded = _Bounded(len(data))
    try:
        model = _check_header(data, source)
        if model.Version() != SCHEMA_VERSION:
            raise GraphFileError(f"'{source}' has TFLite schema version {model.Version()}; this converter reads "
                                 f"version {SCHEMA_VERSION}")
        codes = [(_operator_name(model.OperatorCodes(i)), model.OperatorCodes(i).Version())
                 for i in range(bounded.count(model.OperatorCodesLength(), "operator codes"))]
        subgraphs = bounded.count(model.SubgraphsLength(), "subgraphs")
        if subgraphs == 0:
            raise GraphFileError(f"'{source}' has no subgraph")
        bounded.count(model.BuffersLength(), "buffers")
        graphs = [_graph(model, model.Subgraphs(k), k, codes, data, bounded) for k in range(subgraphs)]
        main, signatures = graphs[0], _signatures(model, graphs, bounded)
        first = next((s for s in signatures if s.subgraph == 0), None)       # names subgraph 0's inputs/outputs
        return ModelRecord(main.tensors, main.operators, main.inputs, main.outputs, main.name, model.Version(),
                           first.names if first else {}, graphs, signatures)
    except GraphFileError as e:
        if source in e.args[0]:
            raise
        raise GraphFileError(f"'{source}': {e.args[0]}") from None
    except (IndexError, struct.error, ValueError, TypeError, UnicodeDecodeError, AttributeError) as e:
        raise GraphFileError(f"'{source}' is truncated or corrupted: {type(e).__name__}: {e}") from None
