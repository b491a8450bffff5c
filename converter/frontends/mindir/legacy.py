"""MINDIR files of MindSpore 1.0: written in ONNX's protobuf rather than mind_ir's, re-expressed here as a mind_ir
`ModelProto` of the attribute style (MindSpore <= 2.2), so that one importer reads every version.

MindSpore 1.0 writes the parameters as the graph's initializers (and lists them among its inputs too), a node's
primitive as its `op_type` with the primitive's arguments as its attributes, and every attribute value (and
every Constant) as a TENSORS attribute whose `ref_attr_name` says its structure: "scalar:value0",
"scalar:Tuple[value1,value2,]" or "scalar:List[...]", "tensor:value0"; the attribute without a name is the node's
output shape. Some primitives had other names then (`tuple_getitem`), or other argument names (MaxPool's `ksize`
and `padding`).
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError

from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.proto_text import undecodable_field
from lite.status import GraphFileError, NotSupportedError

A = pb.AttributeProto
# ONNX's TensorProto data types, which MindSpore 1.0 uses, are numbered as mind_ir's
TYPED_FIELDS = ("float_data", "int32_data", "int64_data", "double_data", "uint64_data", "string_data")
# primitives named otherwise then
PRIMITIVES = {"tuple_getitem": "TupleGetItem", "make_tuple": "MakeTuple", "depend": "Depend", "TensorAdd": "Add"}
RENAMED = {"MaxPool": {"ksize": "kernel_size", "padding": "pad_mode"},
           "AvgPool": {"ksize": "kernel_size", "padding": "pad_mode"}}
STRUCTURE = re.compile(r"(scalar|tensor|type):(.*)")


def is_legacy(data: bytes) -> bool:
    """Whether `data` starts as ONNX's ModelProto does (field 1, ir_version, an integer); mind_ir's starts with
    its ir_version as text."""
    return data[:1] == b"\x08"


def parse_legacy(data: bytes, source: str) -> pb.ModelProto:
    """The MindSpore 1.0 model in `data` as a mind_ir ModelProto (GraphFileError naming `source` when it is not
    one)."""
    old = onnx.ModelProto()
    try:
        old.ParseFromString(data)
    except (DecodeError, UnicodeDecodeError) as e:
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: {e}") from None
    field = undecodable_field(old)
    if field:
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: {field} is not UTF-8 text")
    if old.producer_name != "MindSpore" or not old.graph.node:
        raise GraphFileError(f"'{source}' is not a readable MINDIR model: it is not a graph MindSpore wrote")
    model = pb.ModelProto(producer_name=old.producer_name, model_version=str(old.model_version),
                          ir_version=str(old.ir_version))
    g, og = model.graph, old.graph
    g.name = og.name
    for t in og.initializer:
        try:
            g.parameter.add().CopyFrom(_tensor(t))
        except (KeyError, ValueError, TypeError) as e:
            raise GraphFileError(f"'{source}': parameter '{t.name}' cannot be read: {e}") from None
    weights = {t.name for t in og.initializer}
    for vi in og.input:
        if vi.name not in weights:
            shape = vi.type.tensor_type
            g.input.add(name=vi.name).tensor.add(data_type=shape.elem_type,
                                                 dims=[d.dim_value for d in shape.shape.dim])
    for node in og.node:
        if not node.output:
            raise GraphFileError(f"'{source}': node '{node.name}' ({node.op_type}) has no output")
        copy = g.node.add(name=node.name or node.output[0], input=node.input, output=node.output)
        if node.op_type == "Constant":
            if not node.attribute:
                raise GraphFileError(f"'{source}': Constant node '{node.output[0]}' has no value")
            copy.op_type = "Constant"
            copy.attribute.add().CopyFrom(_attribute(node.attribute[0], "value", source, node))
            continue
        op = PRIMITIVES.get(node.op_type, node.op_type)
        prim = model.primitives.add(name=f"{op}:{len(model.primitives)}", op_type=op)
        renamed = RENAMED.get(node.op_type, {})
        for attr in node.attribute:
            if attr.name and attr.name not in ("input_names", "output_names"):
                prim.attribute.add().CopyFrom(_attribute(attr, renamed.get(attr.name, attr.name), source, node))
        copy.op_type = f"REF::{prim.name}"
    for vi in og.output:
        g.output.add(name=vi.name)
    return model


def _tensor(t: onnx.TensorProto) -> pb.TensorProto:
    out = pb.TensorProto(name=t.name, dims=t.dims, data_type=t.data_type)
    if t.raw_data:
        out.raw_data = t.raw_data
    else:
        out.raw_data = _values(t).astype(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
                                         .newbyteorder("<")).tobytes()
    return out


def _values(t: onnx.TensorProto) -> np.ndarray:
    if t.raw_data:
        return onnx.numpy_helper.to_array(t)
    for field in TYPED_FIELDS:
        values = getattr(t, field)
        if values:
            return np.array([v.decode() for v in values] if field == "string_data" else list(values))
    return np.zeros(0)


def _attribute(attr: onnx.AttributeProto, name: str, source: str, node: onnx.NodeProto) -> pb.AttributeProto:
    """A 1.0 attribute (its values in `tensors`, its structure in `ref_attr_name`) as a mind_ir one."""
    match = STRUCTURE.fullmatch(attr.ref_attr_name)
    values = {t.name: t for t in attr.tensors}
    if attr.type != onnx.AttributeProto.TENSORS or match is None:
        raise NotSupportedError(f"'{source}': attribute '{attr.name}' of node '{node.name}' ({node.op_type}) is "
                                f"not in MindSpore 1.0's form (a TENSORS attribute described by ref_attr_name)")
    kind, structure = match.groups()
    try:
        if kind == "tensor":
            return A(name=name, type=A.TENSOR, t=_tensor(values[structure.rstrip(",")]))
        out, rest = _structured(structure, values)
    except (KeyError, IndexError, ValueError, TypeError) as e:
        raise GraphFileError(f"'{source}': attribute '{attr.name}' of node '{node.name}' ({node.op_type}) does "
                             f"not match its structure '{attr.ref_attr_name}': {e}") from None
    if rest.strip(","):
        raise GraphFileError(f"'{source}': attribute '{attr.name}' of node '{node.name}' ({node.op_type}) has "
                             f"an unreadable structure '{attr.ref_attr_name}'")
    out.name = name
    return out


def _structured(text: str, values: dict[str, onnx.TensorProto]) -> tuple[pb.AttributeProto, str]:
    """The value `text` starts with ("value0", "Tuple[value1,List[value2,],]") and the text after it."""
    for kind, sequence in (("Tuple[", A.TUPLE), ("List[", A.LIST)):
        if text.startswith(kind):
            out, text = A(type=sequence), text[len(kind):]
            while not text.startswith("]"):
                item, text = _structured(text, values)
                out.values.add().CopyFrom(item)
                text = text.removeprefix(",")
            return out, text[1:].removeprefix(",")
    name, _, rest = text.partition(",")
    if name.endswith("]"):          # the last item of a sequence written without its trailing comma
        name, rest = name.rstrip("]"), "]" * (len(name) - len(name.rstrip("]"))) + rest
    return _scalar(values[name]), rest


def _scalar(t: onnx.TensorProto) -> pb.AttributeProto:
    value: Any = _values(t)
    if t.dims:
        return A(type=A.TENSOR, t=_tensor(t))
    value = value.reshape(-1)[0]
    if t.data_type == onnx.TensorProto.STRING:
        return A(type=A.STRING, s=str(value).encode())
    if t.data_type == onnx.TensorProto.BOOL:
        return A(type=A.BOOL, i=int(bool(value)))
    if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16):
        return A(type=A.FLOAT, f=float(value))
    if t.data_type == onnx.TensorProto.DOUBLE:
        return A(type=A.DOUBLE, d=float(value))
    return A(type=A.INT64, i=int(value))
