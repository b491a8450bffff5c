"""ONNX importer rules for quantized models: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul,
ConvInteger, MatMulInteger.

Mapping (docs/quantization.md):
- QuantizeLinear / DequantizeLinear with constant per-tensor params -> `QuantDTypeCast`, the params stored on the
  quantized tensor. Per-axis or run-time params, and the DequantizeLinear of a tensor no quantizing op wrote (a
  Gather of a quantized table), use QuantDTypeCast's general form: scale and zero point as inputs (reshaped to
  broadcast along `axis`). Constant inputs fold at import.
- QDQ: QuantizeLinear(int8) of a float Conv / Gemm / MatMul whose input comes from a DequantizeLinear and whose
  weight is a dequantized constant becomes an int8 Conv2D / FullConnection: weight int8 per channel, the int32
  bias, output params from the QuantizeLinear, and onnxruntime's requantization (`ONNXRUNTIME`: its float32
  product rounds near ties where TFLite's fixed point does not; MobileNetV2 was 0.20 of a 3.2 logit range apart
  after 52 layers with TFLite's, now equal). A Conv whose input DequantizeLinear also feeds another node
  onnxruntime does not fuse: it runs as onnxruntime's float32 Conv (`ONNXRUNTIME_FLOAT32`; the QDQ ResNets were
  2 and 14 quanta apart with the integer rule there, now equal).
- QLinearConv / QLinearMatMul (whose params may be run-time inputs) and ConvInteger / MatMulInteger use the
  "integer float" form: operands dequantized with scale 1 (q - zp, exact integers in float32), a float Conv2D / MatMul (exact
  while |acc| < 2^24), then Cast to int32 (the *Integer ops) or QuantizeLinear with scale
  s_y / (s_x * s_w) and zero point zp_y (QLinear*, rounding half to even like the ONNX reference).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from onnx import helper

from converter.frontends.onnx.registry import NCHW_TO_NHWC, NHWC_TO_NCHW, ImportContext, onnx_op
from converter.frontends.onnx.rules.nn import _checked_group, _kernel_shape, _spatial_dims, _window_attrs
from converter.ir import Graph, Value
from lite.dtypes import DataType, from_numpy, to_numpy
from lite.kernels.int8.quant_cast import GENERAL_TYPES
from lite.kernels.int8.requantize import ONNXRUNTIME, ONNXRUNTIME_FLOAT32
from schema import fb

INTEGER_TYPES = {np.dtype(np.int8): 8, np.dtype(np.uint8): 8, np.dtype(np.int16): 16}
OIHW_TO_OHWI = (0, 2, 3, 1)


@dataclass
class Dequantized:
    """A constant made by DequantizeLinear: its quantized values and params, kept so a later QuantizeLinear can
    rebuild the int8 weight of a QDQ Conv / Gemm / MatMul from the float constant it sees."""
    real: np.ndarray
    q: np.ndarray
    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


_DEQUANTIZED: "weakref.WeakKeyDictionary[Graph, list[Dequantized]]" = weakref.WeakKeyDictionary()


# ---- params ---------------------------------------------------------------------------------------------------
def quant_params(scale: np.ndarray, zero_point: np.ndarray, bits: int = 8) -> list[Any]:
    params = []
    for s, z in zip(np.ravel(scale), np.broadcast_to(np.ravel(zero_point), np.ravel(scale).shape)):
        p = fb.QuantParamT()
        p.scale, p.zeroPoint, p.numBits, p.narrowRange, p.inited = float(s), int(z), bits, False, True
        params.append(p)
    return params


def _general_dtypes() -> set[np.dtype]:
    """Quantized types only the general QuantDTypeCast form handles (uint16, 4-bit, 2-bit, float8, float4)."""
    return {to_numpy(t) for t in GENERAL_TYPES}


def _quant_dtype(ctx: ImportContext, zero_point: str) -> np.dtype:
    """The quantized type: the zero point's, else opset 21's output_dtype, else uint8."""
    code = ctx.attr("output_dtype", 0)
    try:
        dtype = ctx.value(zero_point).dtype if zero_point else \
            np.dtype(helper.tensor_dtype_to_np_dtype(code)) if code else np.dtype(np.uint8)
    except (KeyError, ValueError, TypeError):
        raise ctx.error(f"output_dtype {code} is not supported") from None
    if dtype not in INTEGER_TYPES and dtype not in _general_dtypes():
        raise ctx.error(f"quantized type {dtype} is not supported")
    return np.dtype(dtype)


def _general(ctx: ImportContext, quantized: np.dtype, real: np.dtype) -> bool:
    """Whether only the general QuantDTypeCast form fits: a newer quantized type, blocked params, or a real
    side other than float32."""
    return quantized in _general_dtypes() or bool(ctx.attr("block_size", 0)) or real != np.float32


def _axis(ctx: ImportContext, rank: int) -> int:
    """The `axis` attribute, normalised when it is valid for the rank."""
    axis = int(ctx.attr("axis", 1))
    return axis % rank if -rank <= axis < rank else axis     # only per-axis params use it


def _along(array: np.ndarray, rank: int, axis: int) -> np.ndarray:
    """A 1-D per-axis parameter reshaped to broadcast along `axis` of a rank-`rank` tensor."""
    if array.size <= 1:
        return array.reshape(())
    return array.reshape([-1 if i == axis else 1 for i in range(rank)])


def _quantized_value(ctx: ImportContext, dtype: np.dtype, params: list[Any], name: str | None = None) -> str:
    """A (fresh, or the given) value name of type `dtype` carrying `params`, for an op to write."""
    name = name or ctx.graph.fresh(f"{ctx.name}:q")
    ctx.graph.values[name] = Value(name, (), np.dtype(dtype), quant_params=params)
    return name


def _emit_q(ctx: ImportContext, op: str, inputs: list[str], params: list[Any], output: str | None = None,
            dtype: np.dtype = np.dtype(np.int8), **attrs: Any) -> str:
    """Emit `op` writing a quantized tensor with `params`."""
    return ctx.emit1(op, inputs, _quantized_value(ctx, dtype, params, output), **attrs)


def _const_q(ctx: ImportContext, array: np.ndarray, params: list[Any], hint: str) -> str:
    name = ctx.add_const(array, hint)
    ctx.graph.values[name].quant_params = params
    return name


def _general_cast(ctx: ImportContext, x: str, dst: np.dtype, scale: str, zero_point: str, axis: int,
                  output: str) -> None:
    """QuantDTypeCast with scale / zero point as inputs, reshaped to broadcast along `axis` of x, or, blocked
    (block_size B), each of their entries repeated over B consecutive elements of that axis."""
    rank, block = ctx.value(x).rank, int(ctx.attr("block_size", 0))
    params = []
    for name in (scale, zero_point):
        if not name:
            continue
        value = ctx.value(name)
        if block:
            name = ctx.emit1("Gather", [name, _block_index(ctx, x, axis, block)], axis=axis)
        elif value.rank == 1 and rank > 1:
            shape = ctx.add_const(np.array([-1 if i == axis else 1 for i in range(rank)], np.int64), "shape")
            name = ctx.emit1("Reshape", [name, shape])
        params.append(name)
    ctx.emit("QuantDTypeCast", [x, *params], [output], src_t=from_numpy(ctx.value(x).dtype), dst_t=from_numpy(dst),
             saturate=bool(ctx.attr("saturate", 1)))


def _block_index(ctx: ImportContext, x: str, axis: int, block: int) -> str:
    """Gather indices repeating each blocked parameter over its `block` elements of x's `axis`."""
    shape = ctx.value(x).shape
    if not 0 <= axis < len(shape) or shape[axis] < 0:
        raise ctx.error(f"blocked quantization needs a static axis {axis} of the input (shape {list(shape)})")
    return ctx.add_const(np.arange(shape[axis], dtype=np.int64) // block, "block_index")


# ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------------------------
@onnx_op("QuantizeLinear")
def quantize_linear(ctx: ImportContext) -> None:
    x, s, z = ctx.input(0), ctx.input(1), ctx.input(2)
    dtype = _quant_dtype(ctx, z)
    axis = _axis(ctx, ctx.value(x).rank)
    scale, zero_point = ctx.const(s), ctx.const(z) if z else np.zeros((), dtype)
    if _general(ctx, dtype, ctx.value(x).dtype) or scale is None or zero_point is None or scale.size > 1:
        _general_cast(ctx, x, dtype, s, z, axis, ctx.outputs[0])
        return
    params = quant_params(scale, zero_point, INTEGER_TYPES[dtype])
    if dtype == np.int8 and fuse_qdq(ctx, x, params):
        return
    _emit_q(ctx, "QuantDTypeCast", [x], params, ctx.outputs[0], dtype, src_t=DataType.FLOAT32,
            dst_t=from_numpy(dtype))


@onnx_op("DequantizeLinear")
def dequantize_linear(ctx: ImportContext) -> None:
    x, s, z = ctx.input(0), ctx.input(1), ctx.input(2)
    value = ctx.value(x)
    axis = _axis(ctx, value.rank)
    if _general(ctx, value.dtype, ctx.value(s).dtype):
        _general_cast(ctx, x, ctx.value(s).dtype, s, z, axis, ctx.outputs[0])
        return
    if value.dtype not in INTEGER_TYPES and value.dtype != np.int32:
        raise ctx.error(f"quantized type {value.dtype} is not supported")
    q, scale, zero_point = ctx.const(x), ctx.const(s), ctx.const(z) if z else np.zeros((), value.dtype)
    if scale is None or zero_point is None or value.dtype == np.int32 and q is None:
        if value.dtype == np.int32:
            raise ctx.error("an int32 input needs constant values, scale and zero point")
        _general_cast(ctx, x, np.dtype(np.float32), s, z, axis, ctx.outputs[0])
        return
    if q is not None:
        real = dequantized_constant(q, scale, zero_point, axis)
        out = ctx.outputs[0]
        ctx.graph.values[out] = Value(out, real.shape, real.dtype, real)
        _DEQUANTIZED.setdefault(ctx.graph, []).append(
            Dequantized(real, q, np.ravel(scale).astype(np.float64), np.ravel(zero_point).astype(np.int64), axis))
        return
    params = quant_params(scale, zero_point, INTEGER_TYPES[value.dtype])
    if scale.size > 1 or not value.quant_params or not _same(value.quant_params, params):
        # a tensor no quantizing op wrote (a Gather of a quantized table, a QLinear* output): (q - zp) * s
        _general_cast(ctx, x, np.dtype(np.float32), s, z, axis, ctx.outputs[0])
        return
    ctx.emit("QuantDTypeCast", [x], ctx.outputs, src_t=from_numpy(value.dtype), dst_t=DataType.FLOAT32)


def dequantized_constant(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, axis: int) -> np.ndarray:
    """(q - zp) * scale in float32 with per-tensor or per-axis params: the float constant of a DequantizeLinear
    of constants."""
    return ((q.astype(np.float32) - _along(zero_point, q.ndim, axis).astype(np.float32))
            * _along(scale, q.ndim, axis).astype(np.float32)).astype(np.float32)


def _same(a: list[Any], b: list[Any]) -> bool:
    return len(a) == len(b) and all(p.scale == q.scale and p.zeroPoint == q.zeroPoint for p, q in zip(a, b))


# ---- QDQ fusion -----------------------------------------------------------------------------------------------
def _producer(ctx: ImportContext, name: str, op: str, perm: tuple[int, ...] | None = None):
    node = ctx.graph.producer(name)
    if node is None or node.op != op or (perm is not None and tuple(node.attrs.get("perm", ())) != perm):
        return None
    return node


def _int8_source(ctx: ImportContext, name: str) -> str | None:
    """The per-tensor int8 value that `name` was dequantized from, if it was."""
    cast = _producer(ctx, name, "QuantDTypeCast")
    if cast is None or len(cast.inputs) != 1:
        return None
    source = ctx.value(cast.inputs[0])
    return source.name if source.dtype == np.int8 and len(source.quant_params) == 1 else None


def _weight_origin(ctx: ImportContext, weight: np.ndarray, layouts: list[tuple[Callable, int]]
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(int8 weight in `weight`'s layout, per-output-channel scales, zero points) of a dequantized constant:
    `layouts` lists (array -> weight layout, the source axis that becomes the output channels)."""
    for record in _DEQUANTIZED.get(ctx.graph, []):
        if record.real.size != weight.size:
            continue
        for layout, channel_axis in layouts:
            if record.scale.size > 1 and record.axis != channel_axis:
                continue
            if record.real.shape and layout(record.real).shape == weight.shape and np.array_equal(
                    layout(record.real), weight):
                q, zp = record.q, record.zero_point
                if q.dtype == np.uint8:
                    q, zp = (q.astype(np.int16) - 128).astype(np.int8), zp - 128
                if q.dtype != np.int8:
                    return None
                channels = weight.shape[0]
                return (np.ascontiguousarray(layout(q)), np.broadcast_to(record.scale, (channels,)),
                        np.broadcast_to(zp, (channels,)))
    return None


def _bias_integers(ctx: ImportContext, bias: np.ndarray, bias_scale: np.ndarray) -> np.ndarray:
    """The int32 values of a dequantized bias constant (its DequantizeLinear's input), else rint(b / scale)."""
    for record in _DEQUANTIZED.get(ctx.graph, []):
        if record.q.dtype == np.int32 and record.real.shape == bias.shape and np.array_equal(record.real, bias):
            return record.q
    return np.clip(np.rint(bias.astype(np.float64) / bias_scale), -(1 << 31), (1 << 31) - 1).astype(np.int32)


def fuse_qdq(ctx: ImportContext, y: str, params: list[Any]) -> bool:
    """Rewrite DQ -> Conv / FullConnection -> Q (this QuantizeLinear) as one int8 op that requantizes as
    onnxruntime's QLinearConv / QGemm (its QDQ transformer makes one of it), `ONNXRUNTIME`: int8 weight per
    channel, the int32 bias as the model stores it. A Conv whose input DequantizeLinear other nodes also read
    (a residual Add) onnxruntime leaves unfused, a float32 Conv: that one runs as it does (`ONNXRUNTIME_FLOAT32`).
    False when `y` is not such a pattern."""
    back = _producer(ctx, y, "Transpose", NHWC_TO_NCHW)
    conv = back and _producer(ctx, back.inputs[0], "Conv2D")
    layer = conv or _producer(ctx, y, "FullConnection")
    if not layer:
        return False
    into = _producer(ctx, layer.inputs[0], "Transpose", NCHW_TO_NHWC) if conv else None
    x = _int8_source(ctx, into.inputs[0] if into else layer.inputs[0]) if into or not conv else None
    w = ctx.const(layer.inputs[1])
    layouts = [(lambda a: a.transpose(OIHW_TO_OHWI), 0)] if conv else [(lambda a: a, 0), (lambda a: a.T, 1)]
    origin = x and w is not None and _weight_origin(ctx, w, layouts)
    if not origin:
        return False
    q, w_scale, w_zp = origin
    x_params = ctx.value(x).quant_params
    consts = [_const_q(ctx, q, quant_params(w_scale, w_zp), "weight")]
    bias = ctx.const(layer.inputs[2]) if len(layer.inputs) > 2 and layer.inputs[2] else None
    if bias is not None:
        bias_scale = x_params[0].scale * w_scale.astype(np.float64)
        consts.append(_const_q(ctx, _bias_integers(ctx, bias, bias_scale),
                               quant_params(bias_scale, np.zeros_like(bias_scale, np.int64), 32), "bias"))
    source = _emit_q(ctx, "Transpose", [x], x_params, perm=list(NCHW_TO_NHWC)) if conv else x
    out = _emit_q(ctx, layer.op, [source, *consts], params, None if conv else ctx.outputs[0], **layer.attrs)
    shared = conv and ctx.readers[into.inputs[0]] > 1
    ctx.graph.producer(out).rounding = ONNXRUNTIME_FLOAT32 if shared else ONNXRUNTIME
    if conv:
        _emit_q(ctx, "Transpose", [out], params, ctx.outputs[0], perm=list(NHWC_TO_NCHW))
    return True


# ---- QLinearConv / QLinearMatMul / ConvInteger / MatMulInteger ------------------------------------------------
def _integers(ctx: ImportContext, x: str, zero_point: str, axis: int = 1) -> str:
    """x - zp as float32 (exact integers): QuantDTypeCast's general form with scale 1."""
    out = ctx.graph.fresh(f"{ctx.name}:int")
    one = ctx.add_const(np.ones((), np.float32), "one")
    zp = zero_point or ctx.add_const(np.zeros((), ctx.value(x).dtype), "zero")
    _general_cast(ctx, x, np.dtype(np.float32), one, zp, axis, out)
    return out


def _integer_conv(ctx: ImportContext, x: str, x_zp: str, w: str, w_zp: str) -> str:
    """The exact integer conv sum (x - zp_x) * (w - zp_w) as an NCHW float tensor."""
    spatial = _spatial_dims(ctx, x)
    if spatial != 2:
        raise ctx.error("only 2-D convolutions are supported")
    group = _checked_group(ctx)
    out_c, in_per_group = ctx.value(w).shape[:2]
    attrs = _window_attrs(ctx, spatial, _kernel_shape(ctx, w, spatial))
    weight = ctx.emit1("Transpose", [_integers(ctx, w, w_zp, 0)], perm=list(OIHW_TO_OHWI))
    return ctx.nhwc_op("Conv2D", _integers(ctx, x, x_zp), [weight], None, group=group,
                       in_channel=max(in_per_group, 0) * group, out_channel=max(out_c, 0), **attrs)


def _integer_matmul(ctx: ImportContext, a: str, a_zp: str, b: str, b_zp: str) -> str:
    """(a - zp_a) @ (b - zp_b) as float32; b's zero point may be per column."""
    return ctx.emit1("MatMul", [_integers(ctx, a, a_zp), _integers(ctx, b, b_zp, ctx.value(b).rank - 1)])


def _requantize_float(ctx: ImportContext, acc: str, x_s: str, w_s: str, y_s: str, y_zp: str, channel_axis: int
                      ) -> None:
    """rint(acc * (x_s * w_s / y_s)) + y_zp, saturated, the multiplier and the product in float32 as onnxruntime
    requantizes; w_s may be per channel along `channel_axis` of acc."""
    rank = ctx.value(acc).rank
    w_scale = w_s
    if ctx.value(w_s).rank == 1 and ctx.value(w_s).shape[0] != 1:
        shape = ctx.add_const(np.array([-1 if i == channel_axis else 1 for i in range(rank)], np.int64), "shape")
        w_scale = ctx.emit1("Reshape", [w_s, shape])
    multiplier = ctx.emit1("Div", [ctx.emit1("Mul", [x_s, w_scale]), y_s])
    one = ctx.add_const(np.ones((), np.float32), "one")
    ctx.emit("QuantDTypeCast", [ctx.emit1("Mul", [acc, multiplier]), one, y_zp], ctx.outputs[:1],
             src_t=DataType.FLOAT32, dst_t=from_numpy(ctx.value(y_zp).dtype))


@onnx_op("ConvInteger")
def conv_integer(ctx: ImportContext) -> None:
    acc = _integer_conv(ctx, ctx.input(0), ctx.input(2), ctx.input(1), ctx.input(3))
    ctx.emit("Cast", [acc], ctx.outputs[:1], to=DataType.INT32)


@onnx_op("MatMulInteger")
def matmul_integer(ctx: ImportContext) -> None:
    acc = _integer_matmul(ctx, ctx.input(0), ctx.input(2), ctx.input(1), ctx.input(3))
    ctx.emit("Cast", [acc], ctx.outputs[:1], to=DataType.INT32)


@onnx_op("QLinearConv")
def qlinear_conv(ctx: ImportContext) -> None:
    x, x_s, x_zp, w, w_s, w_zp, y_s, y_zp, b = (ctx.input(i) for i in range(9))
    acc = _integer_conv(ctx, x, x_zp, w, w_zp)
    if b:
        acc = ctx.emit1("Add", [acc, ctx.emit1("Reshape", [ctx.emit1("Cast", [b], to=DataType.FLOAT32), ctx.add_const(
            np.array([1, -1, 1, 1], np.int64), "shape")])])
    _requantize_float(ctx, acc, x_s, w_s, y_s, y_zp, 1)


@onnx_op("QLinearMatMul")
def qlinear_matmul(ctx: ImportContext) -> None:
    a, a_s, a_zp, b, b_s, b_zp, y_s, y_zp = (ctx.input(i) for i in range(8))
    a_s, b_s, y_s = (s if ctx.value(s).dtype == np.float32 else ctx.emit1("Cast", [s], to=DataType.FLOAT32)
                     for s in (a_s, b_s, y_s))    # float16 scales: the requantization runs in float32
    acc = _integer_matmul(ctx, a, a_zp, b, b_zp)
    _requantize_float(ctx, acc, a_s, b_s, y_s, y_zp, ctx.value(acc).rank - 1)
