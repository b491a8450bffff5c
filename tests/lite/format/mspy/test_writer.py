"""The writer's quantization parameters: per-channel ones are flat `ChannelQuant` vectors in the file, an int8 conv's
implied int32 bias params are left out, and reading the file back gives the very objects that were written."""
from __future__ import annotations

from typing import Any

import flatbuffers
import numpy as np
import pytest

from lite.dtypes import DataType
from lite.format import mspy
from lite.model import Model, NodeDef, TensorDef
from schema import FILE_IDENTIFIER, fb
from schema import attrs as op_attrs

CHANNELS = 4
X, W, B, Y = range(4)    # tensor indices of `int8_conv`


def param(scale: float, zero_point: int = 0, bits: int = 8, narrow: bool = True, **extra: Any) -> fb.QuantParamT:
    return fb.QuantParamT(scale=scale, zeroPoint=zero_point, numBits=bits, narrowRange=narrow, inited=True, **extra)


def weight_params(zero_points: list[int] | None = None, bits: int = 8, narrow: bool = True) -> list[fb.QuantParamT]:
    scales = np.random.default_rng(1).uniform(1e-3, 1e-1, CHANNELS)    # arbitrary doubles: no bit to spare
    return [param(float(s), z, bits, narrow) for s, z in zip(scales, zero_points or [0] * CHANNELS)]


def x_param() -> fb.QuantParamT:
    return param(0.0473, -3, narrow=False, min=-0.9, max=11.1)


def implied_bias(x: fb.QuantParamT, weight: list[fb.QuantParamT]) -> list[fb.QuantParamT]:
    """The int32 bias params the quantizer makes (converter/quant/full_quant.set_int32_bias)."""
    return [param(x.scale * w.scale, 0, 32, False) for w in weight]


def int8_conv(weight: list[fb.QuantParamT], bias: list[fb.QuantParamT] | None = None,
              x: fb.QuantParamT | None = None) -> tuple[list[TensorDef], list[NodeDef]]:
    """x int8 [1, 2, 2, 3] -> 1x1 Conv2D (weight int8 OHWI [4, 1, 1, 3], bias int32 [4]) -> y int8."""
    x = x or x_param()
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (CHANNELS, 1, 1, 3)).astype(np.int8)
    b = rng.integers(-1000, 1000, CHANNELS).astype(np.int32)
    tensors = [TensorDef(X, "x", fb.NodeType.PARAMETER, DataType.INT8, (1, 2, 2, 3), fb.Format.NHWC,
                         quant_params=[x]),
               TensorDef(W, "w", fb.NodeType.VALUE, DataType.INT8, w.shape, fb.Format.OHWI, w, weight),
               TensorDef(B, "b", fb.NodeType.VALUE, DataType.INT32, b.shape, fb.Format.ND, b,
                         implied_bias(x, weight) if bias is None else bias),
               TensorDef(Y, "y", fb.NodeType.CNODE, DataType.INT8, (1, 2, 2, CHANNELS), fb.Format.NHWC,
                         quant_params=[param(0.11, 7, narrow=False)])]
    attrs = op_attrs.build("Conv2D", {"kernel_h": 1, "kernel_w": 1, "in_channel": 3, "out_channel": CHANNELS})
    return tensors, [NodeDef("conv", "Conv2D", attrs, [X, W, B], [Y])]


def write(tensors: list[TensorDef], nodes: list[NodeDef]) -> bytes:
    return mspy.write("conv", tensors, nodes, [X], [Y])


def fields(params: list[Any]) -> list[dict[str, Any]]:
    return [{k: (type(v), v) for k, v in vars(p).items()} for p in params]


def stored(buf: bytes, index: int) -> Any:
    return fb.MetaGraph.GetRootAs(buf, 0).AllTensors(index)


@pytest.mark.parametrize("zero_points, bits, narrow", [(None, 8, True), ([0, -2, 5, 0], 7, False)])
def test_per_channel_params_round_trip_through_flat_vectors(zero_points, bits, narrow) -> None:
    tensors, nodes = int8_conv(weight_params(zero_points, bits, narrow))
    buf = write(tensors, nodes)
    w = stored(buf, W)
    assert w.QuantParamsLength() == 0 and w.ChannelQuant().ScalesLength() == CHANNELS
    assert w.ChannelQuant().ZeroPointsLength() == (CHANNELS if zero_points else 0)
    model = Model.Import(buf)
    for t in tensors:
        assert fields(model.tensors[t.index].quant_params) == fields(t.quant_params), t.name
        assert model.tensors[t.index].quant_axis == t.quant_axis


def test_per_channel_params_along_another_axis() -> None:
    tensors, nodes = int8_conv(weight_params())
    w = tensors[W]
    w.data = np.ascontiguousarray(w.data.transpose(3, 1, 2, 0))    # channels last, as a MatMul B
    w.dims, w.quant_axis = w.data.shape, 3
    read = Model.Import(write(tensors, nodes)).tensors[W]
    assert read.quant_axis == 3 and fields(read.quant_params) == fields(w.quant_params)


def test_implied_bias_params_are_left_out_and_restored() -> None:
    tensors, nodes = int8_conv(weight_params())
    buf = write(tensors, nodes)
    assert stored(buf, B).QuantParamsLength() == 0 and stored(buf, B).ChannelQuant() is None
    assert fields(Model.Import(buf).tensors[B].quant_params) == fields(tensors[B].quant_params)


def test_bias_params_other_than_the_implied_ones_are_stored() -> None:
    weight = weight_params()
    bias = implied_bias(x_param(), weight)
    bias[2].scale = float(np.nextafter(bias[2].scale, 1.0))
    tensors, nodes = int8_conv(weight, bias)
    buf = write(tensors, nodes)
    assert stored(buf, B).ChannelQuant().ScalesLength() == CHANNELS
    assert fields(Model.Import(buf).tensors[B].quant_params) == fields(bias)


def test_per_tensor_params_keep_their_table() -> None:
    tensors, nodes = int8_conv(weight_params())
    buf = write(tensors, nodes)
    assert stored(buf, X).QuantParamsLength() == 1 and stored(buf, X).ChannelQuant() is None
    assert fields(Model.Import(buf).tensors[X].quant_params) == fields([x_param()])


@pytest.mark.parametrize("field, value", [("numBits", 4), ("narrowRange", False), ("max", 1.5)])
def test_params_the_compact_form_cannot_hold_are_refused(field: str, value: Any) -> None:
    weight = weight_params()
    setattr(weight[1], field, value)
    with pytest.raises(ValueError, match="tensor 'w'"):
        write(*int8_conv(weight))


def object_api_file(weight: list[fb.QuantParamT], bias: list[fb.QuantParamT], weight_bytes: bytes | None = None,
                    compress: int = fb.WeightQuantCompressType.NONE) -> bytes:
    """The int8 conv built with flatc's object API, one QuantParam table per channel as format 1.0 wrote them;
    `weight_bytes` and `compress` replace how the weight is stored."""
    tensors, nodes = int8_conv(weight, bias)
    graph = fb.MetaGraphT()
    graph.allTensors = []
    for t in tensors:
        table = fb.TensorT()
        table.name, table.nodeType, table.dataType, table.dims = t.name, t.node_type, t.data_type, list(t.dims)
        table.format, table.quantParams, table.quantAxis = t.format, t.quant_params, t.quant_axis
        table.data = None if t.data is None else np.frombuffer(t.data.tobytes(), np.uint8)
        if t.index == W and weight_bytes is not None:
            table.data, table.weightQuantCompressType = np.frombuffer(weight_bytes, np.uint8), compress
        graph.allTensors.append(table)
    node = fb.NodeT()
    node.name, node.primitiveType, node.primitive = "conv", fb.Primitive.Conv2D, fb.Conv2DT()
    node.inputIndex, node.outputIndex = nodes[0].inputs, nodes[0].outputs
    graph.nodes, graph.inputIndex, graph.outputIndex = [node], [X], [Y]
    builder = flatbuffers.Builder(1024)
    builder.Finish(graph.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def test_format_1_0_per_channel_tables_still_read() -> None:
    weight = weight_params([1, 0, -1, 3])
    bias = implied_bias(x_param(), weight)
    model = Model.Import(object_api_file(weight, bias))
    assert fields(model.tensors[W].quant_params) == fields(weight)
    assert fields(model.tensors[B].quant_params) == fields(bias)


def low_bit_conv(bits: int) -> tuple[list[TensorDef], list[NodeDef]]:
    """The int8 conv with `bits`-bit weights spanning their whole two's complement range."""
    tensors, nodes = int8_conv(weight_params(bits=bits))
    w = tensors[W]
    w.data = np.random.default_rng(bits).integers(-(1 << (bits - 1)), 1 << (bits - 1), w.dims).astype(np.int8)
    return tensors, nodes


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 5, 7])
def test_low_bit_weights_are_bit_packed_and_read_back_exactly(bits: int) -> None:
    tensors, nodes = low_bit_conv(bits)
    buf = write(tensors, nodes)
    w = stored(buf, W)
    assert w.WeightQuantCompressType() == fb.WeightQuantCompressType.BITPACKING
    assert w.DataLength() == -(-tensors[W].data.size * bits // 8)          # 12 weights: 2 bytes at 1 bit
    read = Model.Import(buf).tensors[W]
    assert read.data.dtype == np.int8 and np.array_equal(read.data, tensors[W].data)
    assert stored(buf, B).WeightQuantCompressType() == fb.WeightQuantCompressType.NONE      # int32 bias


def test_weights_wider_than_their_num_bits_are_stored_whole() -> None:
    tensors, nodes = low_bit_conv(4)
    tensors[W].data[0, 0, 0, 0] = 8                                       # beyond 4-bit two's complement
    buf = write(tensors, nodes)
    assert stored(buf, W).WeightQuantCompressType() == fb.WeightQuantCompressType.NONE
    assert np.array_equal(Model.Import(buf).tensors[W].data, tensors[W].data)


def test_bit_packed_weights_of_the_wrong_length_or_kind_are_refused() -> None:
    from lite.status import GraphFileError
    from schema import bitpack
    tensors, _ = low_bit_conv(4)
    packed = bitpack.pack(tensors[W].data, 4)
    weight, bias = tensors[W].quant_params, tensors[B].quant_params
    with pytest.raises(GraphFileError, match="tensor 'w' holds 5 bytes but dims .* 4-bit packed values need 6"):
        Model.Import(object_api_file(weight, bias, packed[:-1], fb.WeightQuantCompressType.BITPACKING))
    with pytest.raises(GraphFileError, match="tensor 'w' has unknown weight_quant_compress_type 3"):
        Model.Import(object_api_file(weight, bias, packed, 3))
    wide = weight_params(bits=8)
    with pytest.raises(GraphFileError, match="tensor 'w' is bit-packed, but is not int8 of known dims with one num_bits below 8"):
        Model.Import(object_api_file(wide, implied_bias(x_param(), wide), packed,
                                     fb.WeightQuantCompressType.BITPACKING))


@pytest.mark.parametrize("rounding", ["tflite", "nnacl", "onnxruntime"])
def test_a_nodes_rounding_round_trips_and_the_default_is_not_written(rounding: str) -> None:
    """`NodeDef.rounding` is stored per node; TFLite's, the default, writes no field, so files that have only it
    keep their bytes (the same bytes as a node that never set it)."""
    tensors, nodes = int8_conv(weight_params())
    plain = write(tensors, nodes)
    nodes[0].rounding = rounding
    buf = write(tensors, nodes)
    assert Model.Import(buf).nodes[0].rounding == rounding
    assert (buf == plain) == (rounding == "tflite")
    assert fb.MetaGraph.GetRootAs(buf, 0).Nodes(0).Rounding() == getattr(fb.Rounding, rounding.upper())


def test_an_unknown_rounding_is_a_graph_file_error() -> None:
    from lite.status import GraphFileError
    tensors, nodes = int8_conv(weight_params())
    nodes[0].rounding = "onnxruntime"
    buf = bytearray(write(tensors, nodes))
    node = fb.MetaGraph.GetRootAs(buf, 0).Nodes(0)
    where = node._tab.Pos + node._tab.Offset(16)            # the Rounding field (the sixth): one byte
    assert buf[where] == fb.Rounding.ONNXRUNTIME
    buf[where] = 9
    with pytest.raises(GraphFileError, match="unknown rounding 9"):
        Model.Import(bytes(buf))
