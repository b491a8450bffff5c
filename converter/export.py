"""IR graph -> `.ms` FlatBuffers bytes, and atomic file writing."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import flatbuffers
import numpy as np

from converter.ir import Graph, Value
from converter.shape_inference import make_attrs
from lite import dtypes
from schema import attrs as op_attrs
from schema import DATA_ALIGNMENT, FILE_IDENTIFIER, FORMAT_VERSION, NO_TENSOR, fb


def _uint_vector(builder: flatbuffers.Builder, values: list[int]) -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype=np.uint32))


def _aligned_bytes(builder: flatbuffers.Builder, data: bytes) -> int:
    """A [ubyte] vector whose first byte is DATA_ALIGNMENT-aligned in the finished buffer."""
    builder.StartVector(1, len(data), DATA_ALIGNMENT)
    builder.head -= len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _tensor(builder: flatbuffers.Builder, value: Value, node_type: int, quant: list | None) -> int:
    name = builder.CreateString(value.name)
    dims = builder.CreateNumpyVector(np.asarray(value.shape, dtype=np.int64))
    data = _aligned_bytes(builder, np.ascontiguousarray(value.const).astype(value.const.dtype.newbyteorder("<"),
                                                                             copy=False).tobytes()) \
        if value.const is not None else None
    quant_offsets = [q.Pack(builder) for q in quant or []]
    qvec = None
    if quant_offsets:
        builder.StartVector(4, len(quant_offsets), 4)
        for q in reversed(quant_offsets):
            builder.PrependUOffsetTRelative(q)
        qvec = builder.EndVector()
    fb.TensorStart(builder)
    fb.TensorAddName(builder, name)
    fb.TensorAddNodeType(builder, node_type)
    fb.TensorAddDataType(builder, dtypes.from_numpy(value.dtype))
    fb.TensorAddDims(builder, dims)
    fb.TensorAddFormat(builder, value.format)
    if data is not None:
        fb.TensorAddData(builder, data)
    if qvec is not None:
        fb.TensorAddQuantParams(builder, qvec)
    return fb.TensorEnd(builder)


def _table_vector(builder: flatbuffers.Builder, offsets: list[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def to_bytes(graph: Graph, quant_params: dict[str, list] | None = None) -> bytes:
    """Serialise `graph` (already optimised) into a `.ms` buffer."""
    quant_params = quant_params or {}
    graph.sort()
    names: list[str] = []
    index: dict[str, int] = {}

    def tensor_index(name: str) -> int:
        if name not in index:
            index[name] = len(names)
            names.append(name)
        return index[name]

    for name in graph.inputs:
        tensor_index(name)
    for node in graph.nodes:
        for name in node.inputs:
            if name:
                tensor_index(name)
        for name in node.outputs:
            tensor_index(name)
    for name in graph.outputs:
        tensor_index(name)

    builder = flatbuffers.Builder(1 << 20)
    inputs = set(graph.inputs)
    tensors = []
    for name in names:
        value = graph.values[name]
        kind = fb.NodeType.VALUE if value.const is not None else (
            fb.NodeType.PARAMETER if name in inputs else fb.NodeType.CNODE)
        tensors.append(_tensor(builder, value, kind, quant_params.get(name)))
    nodes = []
    for node in graph.nodes:
        nname = builder.CreateString(node.name)
        prim = op_attrs.pack(node.op, make_attrs(node.op, node.attrs), builder)
        ins = _uint_vector(builder, [index[i] if i else NO_TENSOR for i in node.inputs])
        outs = _uint_vector(builder, [index[o] for o in node.outputs])
        fb.NodeStart(builder)
        fb.NodeAddName(builder, nname)
        fb.NodeAddPrimitiveType(builder, getattr(fb.Primitive, node.op))
        fb.NodeAddPrimitive(builder, prim)
        fb.NodeAddInputIndex(builder, ins)
        fb.NodeAddOutputIndex(builder, outs)
        nodes.append(fb.NodeEnd(builder))
    tensor_vec = _table_vector(builder, tensors)
    node_vec = _table_vector(builder, nodes)
    gin = _uint_vector(builder, [index[i] for i in graph.inputs])
    gout = _uint_vector(builder, [index[o] for o in graph.outputs])
    name = builder.CreateString(graph.name)
    version = builder.CreateString(FORMAT_VERSION)
    fb.MetaGraphStart(builder)
    fb.MetaGraphAddName(builder, name)
    fb.MetaGraphAddVersion(builder, version)
    fb.MetaGraphAddFmkType(builder, 0)
    fb.MetaGraphAddInputIndex(builder, gin)
    fb.MetaGraphAddOutputIndex(builder, gout)
    fb.MetaGraphAddNodes(builder, node_vec)
    fb.MetaGraphAddAllTensors(builder, tensor_vec)
    root = fb.MetaGraphEnd(builder)
    builder.Finish(root, file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def write_atomic(path: str | os.PathLike, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename: readers never see a partial file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
