"""Build `.tflite` files in tests with the schema's flatc-generated builders (the `tflite` package), and run
them through LiteRT's Interpreter (the oracle) and through our converter and runtime."""
from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import flatbuffers
import numpy as np
import pytest
import tflite

import lite
from converter import convert_tflite
from tests.util import relative_to_range

TYPES = {np.dtype(np.float32): tflite.TensorType.FLOAT32, np.dtype(np.float16): tflite.TensorType.FLOAT16,
         np.dtype(np.int32): tflite.TensorType.INT32, np.dtype(np.int64): tflite.TensorType.INT64,
         np.dtype(np.int8): tflite.TensorType.INT8, np.dtype(np.uint8): tflite.TensorType.UINT8,
         np.dtype(np.int16): tflite.TensorType.INT16, np.dtype(np.bool_): tflite.TensorType.BOOL}


def _module(name: str) -> Any:
    return importlib.import_module(f"tflite.{name}")


def table(b: flatbuffers.Builder, name: str, **fields: Any) -> int:
    """One table through its generated `<Name>Start` / `<Name>Add<Field>` / `<Name>End` functions. Field
    values are scalars, or offsets already built (strings, vectors, tables)."""
    m = _module(name)
    getattr(m, f"{name}Start")(b)
    for key, value in fields.items():
        getattr(m, f"{name}Add{key}")(b, value)
    return getattr(m, f"{name}End")(b)


def vector(b: flatbuffers.Builder, values: Any, dtype: Any = np.int32) -> int:
    return b.CreateNumpyVector(np.ascontiguousarray(values, dtype).ravel())


def offsets(b: flatbuffers.Builder, items: list[int]) -> int:
    b.StartVector(4, len(items), 4)
    for item in reversed(items):
        b.PrependUOffsetTRelative(item)
    return b.EndVector()


@dataclass
class Sparse:
    """A sparse constant: traversal order, block map, and per level (dense_size, segments, indices)."""
    values: np.ndarray
    traversal_order: list[int]
    block_map: list[int]
    levels: list[tuple[int, list[int] | None, list[int] | None]]


@dataclass
class TFLiteModel:
    """A TFLite model under construction: tensors, constants and operators of subgraph 0 by index, and the
    body subgraphs that WHILE / IF name (`subgraph`)."""
    tensors: list[dict] = field(default_factory=list)
    buffers: list[np.ndarray | None] = field(default_factory=lambda: [None])
    operators: list[dict] = field(default_factory=list)
    codes: list[tuple[int, str | None, int]] = field(default_factory=list)
    bodies: list[tuple["TFLiteModel", list[int], list[int]]] = field(default_factory=list)

    def subgraph(self, build: Any) -> int:
        """Add a body subgraph: `build(g)` fills a fresh tensor table `g` (sharing this model's buffers and
        operator codes) and returns its (inputs, outputs); returns the subgraph index."""
        g = TFLiteModel(buffers=self.buffers, codes=self.codes)
        inputs, outputs = build(g)
        self.bodies.append((g, inputs, outputs))
        return len(self.bodies)

    def tensor(self, shape, dtype=np.float32, name: str | None = None, data: np.ndarray | None = None,
               scale=None, zero_point=None, axis: int = 0, sparse: Sparse | None = None,
               signature: list[int] | None = None, variable: bool = False) -> int:
        buffer = 0
        if data is not None or sparse is not None:
            raw = (sparse.values if sparse is not None else np.asarray(data, dtype)).astype(dtype)
            self.buffers.append(raw)
            buffer = len(self.buffers) - 1
        self.tensors.append(dict(shape=list(shape), dtype=np.dtype(dtype), name=name or f"t{len(self.tensors)}",
                                 buffer=buffer, scale=scale, zero_point=zero_point, axis=axis, sparse=sparse,
                                 signature=signature, variable=variable))
        return len(self.tensors) - 1

    def const(self, array: np.ndarray, dtype=None, **kw: Any) -> int:
        array = np.asarray(array)
        return self.tensor(array.shape, dtype or array.dtype, data=array, **kw)

    def op(self, code: str, inputs: list[int], outputs: list[int], options: str | None = None,
           custom: str | None = None, version: int = 1, **fields: Any) -> None:
        key = (getattr(tflite.BuiltinOperator, code), custom, version)
        if key not in self.codes:
            self.codes.append(key)
        self.operators.append(dict(code=self.codes.index(key), inputs=inputs, outputs=outputs, options=options,
                                   fields=fields))

    # ---- serialisation ------------------------------------------------------------------------------------------
    def _quantization(self, b: flatbuffers.Builder, t: dict) -> int | None:
        if t["scale"] is None:
            return None
        scale = np.atleast_1d(np.asarray(t["scale"], np.float32))
        zp = np.broadcast_to(np.atleast_1d(np.asarray(0 if t["zero_point"] is None else t["zero_point"], np.int64)),
                             scale.shape)
        s, z = vector(b, scale, np.float32), vector(b, zp, np.int64)
        return table(b, "QuantizationParameters", Scale=s, ZeroPoint=z, QuantizedDimension=t["axis"])

    def _sparsity(self, b: flatbuffers.Builder, sp: Sparse) -> int:
        levels = []
        for dense_size, segments, indices in sp.levels:
            if segments is None:
                levels.append(table(b, "DimensionMetadata", Format=tflite.DimensionType.DENSE, DenseSize=dense_size))
                continue
            seg = table(b, "Int32Vector", Values=vector(b, segments))
            ind = table(b, "Int32Vector", Values=vector(b, indices))
            levels.append(table(b, "DimensionMetadata", Format=tflite.DimensionType.SPARSE_CSR,
                                ArraySegmentsType=tflite.SparseIndexVector.Int32Vector, ArraySegments=seg,
                                ArrayIndicesType=tflite.SparseIndexVector.Int32Vector, ArrayIndices=ind))
        order, block = vector(b, sp.traversal_order), vector(b, sp.block_map)
        return table(b, "SparsityParameters", TraversalOrder=order, BlockMap=block, DimMetadata=offsets(b, levels))

    def _tensor(self, b: flatbuffers.Builder, t: dict) -> int:
        fields = dict(Shape=vector(b, t["shape"]), Name=b.CreateString(t["name"]), Type=TYPES[t["dtype"]],
                      Buffer=t["buffer"])
        if t["signature"] is not None:
            fields["ShapeSignature"] = vector(b, t["signature"])
        if t["variable"]:
            fields["IsVariable"] = True
        quant = self._quantization(b, t)
        if quant is not None:
            fields["Quantization"] = quant
        if t["sparse"] is not None:
            fields["Sparsity"] = self._sparsity(b, t["sparse"])
        return table(b, "Tensor", **fields)

    def _operator(self, b: flatbuffers.Builder, op: dict) -> int:
        fields: dict[str, Any] = dict(OpcodeIndex=op["code"], Inputs=vector(b, op["inputs"]),
                                      Outputs=vector(b, op["outputs"]))
        if op["options"] is not None:
            values = {k: vector(b, v, v.dtype if isinstance(v, np.ndarray) else np.int32)
                      if isinstance(v, (list, tuple, np.ndarray)) else v
                      for k, v in op["fields"].items()}
            fields["BuiltinOptions"] = table(b, op["options"], **values)
            fields["BuiltinOptionsType"] = getattr(tflite.BuiltinOptions, op["options"])
        return table(b, "Operator", **fields)

    def _subgraph(self, b: flatbuffers.Builder, inputs: list[int], outputs: list[int], name: str) -> int:
        tensors = [self._tensor(b, t) for t in self.tensors]
        ops = [self._operator(b, op) for op in self.operators]
        return table(b, "SubGraph", Tensors=offsets(b, tensors), Inputs=vector(b, inputs),
                     Outputs=vector(b, outputs), Operators=offsets(b, ops), Name=b.CreateString(name))

    def build(self, inputs: list[int], outputs: list[int], signature: dict[str, list[str]] | None = None,
              version: int = 3) -> bytes:
        """The file; `signature` {"inputs": names, "outputs": names} adds a signature def for subgraph 0."""
        b = flatbuffers.Builder(1024)
        buffers = []
        for data in self.buffers:
            buffers.append(table(b, "Buffer", **({} if data is None else {"Data": vector(b, data.reshape(-1).view(np.uint8),
                                                                                         np.uint8)})))
        graphs = [g._subgraph(b, ins, outs, name) for name, (g, ins, outs) in
                  [("main", (self, inputs, outputs)), *((f"body{k + 1}", body) for k, body in enumerate(self.bodies))]]
        codes = []
        for builtin, custom, code_version in self.codes:
            extra = {"CustomCode": b.CreateString(custom)} if custom else {}
            codes.append(table(b, "OperatorCode", BuiltinCode=builtin, DeprecatedBuiltinCode=min(builtin, 127),
                               Version=code_version, **extra))
        fields = dict(Version=version, OperatorCodes=offsets(b, codes), Subgraphs=offsets(b, graphs),
                      Buffers=offsets(b, buffers), Description=b.CreateString("test"))
        if signature:
            maps = {}
            for kind, indices in (("inputs", inputs), ("outputs", outputs)):
                maps[kind] = offsets(b, [table(b, "TensorMap", Name=b.CreateString(n), TensorIndex=i)
                                         for n, i in zip(signature[kind], indices)])
            sig = table(b, "SignatureDef", Inputs=maps["inputs"], Outputs=maps["outputs"],
                        SignatureKey=b.CreateString("serving_default"), SubgraphIndex=0)
            fields["SignatureDefs"] = offsets(b, [sig])
        b.Finish(table(b, "Model", **fields), file_identifier=b"TFL3")
        return bytes(b.Output())


# ---- real models ------------------------------------------------------------------------------------------------
def mediapipe_model(path: str) -> bytes:
    """A `.tflite` file of MediaPipe 0.10's solutions (`path` under its `modules/`), read from an installed
    `mediapipe` wheel without importing it (`pip install --no-deps mediapipe==0.10.14` gives them); the test is
    skipped when it is absent."""
    spec = importlib.util.find_spec("mediapipe")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    file = Path(roots[0]) / "modules" / path if roots else None
    if file is None or not file.is_file():
        pytest.skip(f"{path} needs the model files of mediapipe 0.10 (pip install --no-deps mediapipe==0.10.14)")
    return file.read_bytes()


# ---- running ----------------------------------------------------------------------------------------------------
def litert_interpreter():
    return pytest.importorskip("ai_edge_litert.interpreter", reason="LiteRT (ai-edge-litert) is the oracle")


def run_litert(data: bytes, feeds: list[np.ndarray], threads: int = 2) -> list[np.ndarray]:
    """Outputs of LiteRT's Interpreter with its builtin kernels (no XNNPACK delegate), in graph output order;
    inputs fed in graph input order."""
    module = litert_interpreter()
    interpreter = module.Interpreter(model_content=data, num_threads=threads, experimental_op_resolver_type=
                                     module.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    for detail, x in zip(interpreter.get_input_details(), feeds):
        if list(detail["shape"]) != list(x.shape):
            interpreter.resize_tensor_input(detail["index"], list(x.shape))
    interpreter.allocate_tensors()
    for detail, x in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], x)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()]


def session_of(data: bytes, input_shapes: dict[str, list[int]] | None = None) -> lite.LiteSession:
    buf = convert_tflite(data, input_shapes)
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2))


def run_ours(data: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    session = session_of(data)
    inputs = session.GetInputs()
    changed = [(t, list(x.shape)) for t, x in zip(inputs, feeds) if t.shape() != list(x.shape)]
    if changed:
        session.Resize([t for t, _ in changed], [s for _, s in changed])
    for t, x in zip(session.GetInputs(), feeds):
        t.set_data(x)
    session.RunGraph()
    return [t.numpy() for t in session.GetOutputs().values()]


# ---- one-operator models -----------------------------------------------------------------------------------------
RNG = np.random.default_rng(0)


def rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return RNG.uniform(low, high, shape).astype(np.float32)


@dataclass
class Feed:
    """A graph input fed with exactly these values (any dtype); optional quantization of the tensor."""
    values: np.ndarray
    scale: float | None = None
    zero_point: int | None = None


def single(op: str, inputs: list[Any], outputs: int = 1, options: str | None = None, out_shape: tuple = (1,),
           out_dtypes: tuple = (), out_quant: tuple = (), **fields: Any) -> tuple[bytes, list[np.ndarray]]:
    """A model of one operator: tuples in `inputs` are float graph inputs of that shape (fed random values),
    `Feed`s graph inputs fed their values, arrays are constants, None an omitted input. LiteRT computes the
    output shapes (a few builtins check the file's: `out_shape`); `out_quant` gives (scale, zero point) per
    quantized output."""
    m, feeds, graph_inputs, indices = TFLiteModel(), [], [], []
    for item in inputs:
        if item is None:
            indices.append(-1)
        elif isinstance(item, (tuple, Feed)):
            x = rand(*item) if isinstance(item, tuple) else np.asarray(item.values)
            quant = {} if isinstance(item, tuple) else dict(scale=item.scale, zero_point=item.zero_point)
            indices.append(m.tensor(x.shape, x.dtype, name=f"in{len(graph_inputs)}", **quant))
            graph_inputs.append(indices[-1])
            feeds.append(x)
        else:
            indices.append(m.const(item))
    dtypes = list(out_dtypes) + [np.float32] * (outputs - len(out_dtypes))
    quants = list(out_quant) + [(None, None)] * (outputs - len(out_quant))
    outs = [m.tensor(out_shape, dtypes[k], name=f"out{k}", scale=quants[k][0], zero_point=quants[k][1])
            for k in range(outputs)]
    m.op(op, indices, outs, options, **fields)
    return m.build(graph_inputs, outs), feeds


def check(data: bytes, feeds: list[np.ndarray], tol: float = 1e-4, quantum: int = 0) -> list[np.ndarray]:
    """Our outputs against LiteRT's: floats within `tol` of the output range, integers and bools within
    `quantum` (exact by default)."""
    expected, actual = run_litert(data, feeds), run_ours(data, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        if e.dtype.kind == "f":
            assert relative_to_range(a, e) <= tol
        else:
            assert np.abs(a.astype(np.int64) - e.astype(np.int64)).max(initial=0) <= quantum, (a, e)
    return actual
