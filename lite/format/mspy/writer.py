"""The runtime's graph definitions -> `.ms` bytes of our format. The converter's export and the training
session's checkpoint and inference export all write through here, so the format has one writer."""
from __future__ import annotations

from typing import Sequence

import flatbuffers
import numpy as np

from lite.format.mspy.reader import implied_bias_params
from lite.model import NodeDef, SubGraphDef, TensorDef
from schema import (DATA_ALIGNMENT, FILE_IDENTIFIER, FMK_ONNX, FORMAT_VERSION, NO_TENSOR, bitpack, channel_quant,
                    fb)
from schema import attrs as op_attrs


def _ints(builder: flatbuffers.Builder, values: Sequence[int], dtype: type = np.uint32) -> int:
    return builder.CreateNumpyVector(np.asarray(values, dtype=dtype))


def _aligned_bytes(builder: flatbuffers.Builder, data: bytes) -> int:
    """A [ubyte] vector whose first byte is DATA_ALIGNMENT-aligned in the finished buffer."""
    builder.StartVector(1, len(data), DATA_ALIGNMENT)
    builder.head -= len(data)
    builder.Bytes[builder.head:builder.head + len(data)] = data
    return builder.EndVector()


def _tables(builder: flatbuffers.Builder, offsets: Sequence[int]) -> int:
    builder.StartVector(4, len(offsets), 4)
    for off in reversed(offsets):
        builder.PrependUOffsetTRelative(off)
    return builder.EndVector()


def _tensor(builder: flatbuffers.Builder, t: TensorDef, implied_quant: bool) -> int:
    """The tensor's table; `implied_quant`: its quant params are those the reader derives, so they are left out."""
    name = builder.CreateString(t.name)
    dims = _ints(builder, t.dims, np.int64)
    data = None
    bits = bitpack.packed_bits(t.data, t.quant_params)
    if bits is not None:
        data = _aligned_bytes(builder, bitpack.pack(t.data, bits))
    elif t.data is not None:
        little = np.ascontiguousarray(t.data, dtype=t.data.dtype.newbyteorder("<"))
        data = _aligned_bytes(builder, little.tobytes())
    params = [] if implied_quant else t.quant_params
    quant = _tables(builder, [params[0].Pack(builder)]) if len(params) == 1 else None
    channels = _channel_quant(t).Pack(builder) if len(params) > 1 else None
    perm = _ints(builder, t.source_perm, np.int32) if t.source_perm else None
    dim_names = _tables(builder, [builder.CreateString(n) for n in t.dim_names]) if t.dim_names else None
    fb.TensorStart(builder)
    fb.TensorAddName(builder, name)
    fb.TensorAddNodeType(builder, t.node_type)
    fb.TensorAddDataType(builder, t.data_type)
    fb.TensorAddDims(builder, dims)
    fb.TensorAddFormat(builder, t.format)
    if data is not None:
        fb.TensorAddData(builder, data)
    if quant is not None:
        fb.TensorAddQuantParams(builder, quant)
    if channels is not None:
        fb.TensorAddChannelQuant(builder, channels)
    fb.TensorAddQuantAxis(builder, t.quant_axis)
    if perm is not None:
        fb.TensorAddSourcePerm(builder, perm)
    if bits is not None:
        fb.TensorAddWeightQuantCompressType(builder, fb.WeightQuantCompressType.BITPACKING)
    if dim_names is not None:
        fb.TensorAddDimNames(builder, dim_names)
    return fb.TensorEnd(builder)


def _channel_quant(t: TensorDef) -> fb.ChannelQuantT:
    try:
        return channel_quant.compact(t.quant_params)
    except ValueError as e:
        raise ValueError(f"cannot write the per-channel quantization of tensor '{t.name}': {e}") from None


def _node(builder: flatbuffers.Builder, n: NodeDef) -> int:
    name = builder.CreateString(n.name)
    prim = op_attrs.pack(n.op, n.attrs, builder)
    ins = _ints(builder, [NO_TENSOR if i < 0 else i for i in n.inputs])
    outs = _ints(builder, n.outputs)
    fb.NodeStart(builder)
    fb.NodeAddName(builder, name)
    fb.NodeAddPrimitiveType(builder, getattr(fb.Primitive, n.op))
    fb.NodeAddPrimitive(builder, prim)
    fb.NodeAddInputIndex(builder, ins)
    fb.NodeAddOutputIndex(builder, outs)
    fb.NodeAddQuantType(builder, n.quant_type)
    fb.NodeAddRounding(builder, getattr(fb.Rounding, n.rounding.upper()))        # not written when TFLITE
    return fb.NodeEnd(builder)


def _subgraph(builder: flatbuffers.Builder, sg: SubGraphDef, node_index: dict[int, int]) -> int:
    name = builder.CreateString(sg.name)
    ins, outs = _ints(builder, sg.inputs), _ints(builder, sg.outputs)
    members = _ints(builder, [node_index[id(n)] for n in sg.nodes])
    fb.SubGraphStart(builder)
    fb.SubGraphAddName(builder, name)
    fb.SubGraphAddInputIndices(builder, ins)
    fb.SubGraphAddOutputIndices(builder, outs)
    fb.SubGraphAddNodeIndices(builder, members)
    return fb.SubGraphEnd(builder)


def write(name: str, tensors: Sequence[TensorDef], nodes: Sequence[NodeDef], inputs: Sequence[int],
              outputs: Sequence[int], subgraphs: Sequence[SubGraphDef] = (), fmk_type: int = FMK_ONNX) -> bytes:
    """A `.ms` buffer of our format. `tensors[i].index` must be `i`; nodes should be in execution order;
    `fmk_type` names the source framework (`schema.FMK_TYPES`)."""
    builder = flatbuffers.Builder(1 << 20)
    implied = {t for t, params in implied_bias_params(nodes, tensors).items()
               if channel_quant.same(tensors[t].quant_params, params)}
    tensor_vec = _tables(builder, [_tensor(builder, t, t.index in implied) for t in tensors])
    node_vec = _tables(builder, [_node(builder, n) for n in nodes])
    node_index = {id(n): k for k, n in enumerate(nodes)}
    sub_vec = _tables(builder, [_subgraph(builder, sg, node_index) for sg in subgraphs]) if subgraphs else None
    gin, gout = _ints(builder, inputs), _ints(builder, outputs)
    name_off, version = builder.CreateString(name), builder.CreateString(FORMAT_VERSION)
    fb.MetaGraphStart(builder)
    fb.MetaGraphAddName(builder, name_off)
    fb.MetaGraphAddVersion(builder, version)
    fb.MetaGraphAddFmkType(builder, fmk_type)
    fb.MetaGraphAddInputIndex(builder, gin)
    fb.MetaGraphAddOutputIndex(builder, gout)
    fb.MetaGraphAddNodes(builder, node_vec)
    fb.MetaGraphAddAllTensors(builder, tensor_vec)
    if sub_vec is not None:
        fb.MetaGraphAddSubGraphs(builder, sub_vec)
    builder.Finish(fb.MetaGraphEnd(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())
