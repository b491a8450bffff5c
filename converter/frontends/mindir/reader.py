"""Reading a MINDIR file: the protobuf, its version, its tensors (inline or in external files) and the values of
its attributes and Constant nodes as Python/numpy values."""
from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.mindir.legacy import is_legacy, parse_legacy
from converter.frontends.proto_text import undecodable_field
from lite.status import GraphFileError, NotSupportedError

MAX_VERSION = pb.IR_VERSION_WITH_SCALAR_GRAPH_HOLDER
T = pb.TensorProto
DTYPES = {T.FLOAT: np.float32, T.UINT8: np.uint8, T.INT8: np.int8, T.UINT16: np.uint16, T.INT16: np.int16,
          T.INT32: np.int32, T.INT64: np.int64, T.BOOL: np.bool_, T.FLOAT16: np.float16, T.DOUBLE: np.float64,
          T.FLOAT64: np.float64, T.UINT32: np.uint32, T.UINT64: np.uint64}
A = pb.AttributeProto
# scalar attribute types -> how the value is read: a scalar of its own sets `i`/`f`/`d`/`s`, an element of a
# tuple or list the one-element repeated field instead
SCALARS = {A.FLOAT: lambda a: a.floats[0] if a.floats else a.f,
           A.DOUBLE: lambda a: a.doubles[0] if a.doubles else a.d,
           A.BOOL: lambda a: bool(a.ints[0] if a.ints else a.i),
           A.STRING: lambda a: (a.strings[0] if a.strings else a.s).decode(),
           **dict.fromkeys((A.UINT8, A.INT8, A.UINT16, A.INT16, A.INT32, A.INT64, A.UINT32, A.UINT64),
                           lambda a: int(a.ints[0] if a.ints else a.i))}
MONAD = object()        # the value of an ordering token (UMONAD, IOMONAD): carries no data


def parse(data: bytes, source: str) -> pb.ModelProto:
    """The model in `data`; GraphFileError naming `source` when it is not a MINDIR protobuf, NotSupportedError
    when its format version is newer than the ones known. MindSpore 1.0's files (ONNX's protobuf) are read as
    `legacy` re-expresses them."""
    if is_legacy(data):
        return parse_legacy(data, source)
    model = pb.ModelProto()
    try:
        model.ParseFromString(data)
    except (DecodeError, UnicodeDecodeError) as e:    # protobuf's pure-Python parser decodes strings as it reads
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: {e}") from None
    field = undecodable_field(model)
    if field:
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: {field} is not UTF-8 text")
    if not model.HasField("graph") or not model.graph.node:
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: it has no graph")
    if model.mind_ir_version > MAX_VERSION:
        raise NotSupportedError(f"'{source}' has mind_ir_version {model.mind_ir_version}; versions up to "
                                f"{MAX_VERSION} (MindSpore 1.x-2.x) are supported")
    return model


def dtype_of(tensor: pb.TensorProto, where: str) -> np.dtype:
    if tensor.data_type not in DTYPES:
        name = T.DataType.Name(tensor.data_type) if tensor.data_type in T.DataType.values() else tensor.data_type
        raise NotSupportedError(f"{where}: tensor '{tensor.name}' has data type {name}, which is not supported")
    return np.dtype(DTYPES[tensor.data_type])


def tensor_array(tensor: pb.TensorProto, source: str) -> np.ndarray:
    """The elements of `tensor` in its shape: raw_data, the typed repeated fields, or `external_data` read from
    a file beside `source` (GraphFileError naming that file when it is missing or short)."""
    dtype, shape = dtype_of(tensor, f"'{source}'"), tuple(int(d) for d in tensor.dims)
    if tensor.compression_type != T.NO_COMPRESSION:
        raise NotSupportedError(f"'{source}': tensor '{tensor.name}' is compressed "
                                f"({T.CompressionType.Name(tensor.compression_type)}), which is not supported")
    if tensor.HasField("external_data"):
        raw = _external(tensor, source)
    elif tensor.HasField("raw_data"):
        raw = tensor.raw_data
    else:
        typed = np.array(tensor.float_data or tensor.int32_data or tensor.int64_data or tensor.double_data
                         or tensor.uint64_data, dtype)
        if min(shape, default=0) < 0 or typed.size != math.prod(shape):
            raise GraphFileError(f"'{source}': tensor '{tensor.name}' holds {typed.size} values, its shape "
                                 f"{list(shape)} needs {math.prod(shape)}")
        return typed.reshape(shape)
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) != count * dtype.itemsize:
        raise GraphFileError(f"'{source}': tensor '{tensor.name}' holds {len(raw)} bytes, its shape {list(shape)} "
                             f"of {dtype} needs {count * dtype.itemsize}")
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(shape)


def _external(tensor: pb.TensorProto, source: str) -> bytes:
    ext = tensor.external_data
    path = os.path.join(os.path.dirname(source), ext.location)
    try:
        with open(path, "rb") as f:
            f.seek(ext.offset)
            raw = f.read(ext.length)
    except OSError as e:
        raise GraphFileError(f"'{source}': the external data file '{path}' of tensor '{tensor.name}' cannot be "
                             f"read: {e.strerror or e}") from None
    if len(raw) != ext.length:
        raise GraphFileError(f"'{source}': the external data file '{path}' ends before the {ext.length} bytes at "
                             f"offset {ext.offset} of tensor '{tensor.name}'")
    return raw


def attribute_value(attr: pb.AttributeProto, source: str) -> Any:
    """An attribute (or Constant node value) as Python: scalars, str, lists for tuples and lists, ndarrays for
    tensors, a numpy dtype for a tensor type, None, or MONAD for ordering tokens."""
    try:
        return _attribute_value(attr, source)
    except UnicodeDecodeError:                      # string values are bytes fields: decoded here
        raise GraphFileError(f"'{source}': attribute '{attr.name}' holds text that is not UTF-8") from None


def _attribute_value(attr: pb.AttributeProto, source: str) -> Any:
    if attr.type in SCALARS:
        return SCALARS[attr.type](attr)
    if attr.type in (A.TUPLE, A.LIST):
        return [attribute_value(v, source) for v in attr.values]
    if attr.type == A.TENSORS and attr.tensors or attr.type == A.TENSOR or attr.HasField("t"):
        tensor = attr.tensors[0] if attr.tensors else attr.t
        return dtype_of(tensor, f"'{source}'") if _is_type(tensor) else tensor_array(tensor, source)
    if attr.type in (A.UMONAD, A.IOMONAD):
        return MONAD
    if attr.type == A.NONE:
        return None
    if attr.type == A.UNDEFINED:        # older files leave the type unset on lists of ints and strings
        return list(attr.ints) or [s.decode() for s in attr.strings] or list(attr.floats)
    raise NotSupportedError(f"'{source}': attribute '{attr.name}' has type {A.AttributeType.Name(attr.type)}, "
                            f"which is not supported")


def _is_type(tensor: pb.TensorProto) -> bool:
    """Whether a tensor value stands for a tensor type (MindSpore 2.0 writes Cast's target type so: a data type
    without dims or data)."""
    return not (tensor.dims or tensor.HasField("raw_data") or tensor.HasField("external_data") or tensor.float_data
                or tensor.int32_data or tensor.int64_data or tensor.double_data or tensor.uint64_data)
