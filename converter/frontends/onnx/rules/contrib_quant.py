"""ONNX importer rules for onnxruntime's quantized contrib ops (domain com.microsoft), as its QOperator quantizer
writes them: QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu, QLinearConcat, QLinearGlobalAveragePool,
QLinearAveragePool, QLinearSoftmax, QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat, and its own
QuantizeLinear / DequantizeLinear.

Every QLinear* op runs as QDQ float emulation: inputs dequantized ((q - zp) * s in float32), the float op (the
default-domain rule of the op it quantizes), the result quantized with the output's params. The matrix products
(QGemm, DynamicQuantizeMatMul, MatMulIntegerToFloat) use the "integer float" form of rules/quant.py: exact integer
sums in float32, scaled once.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import MICROSOFT, NCHW_TO_NHWC, NHWC_TO_NCHW, ImportContext, onnx_op
from converter.frontends.onnx.rules.quant import _general_cast, _integers, _requantize_float
from lite.dtypes import DataType

FLOAT = np.dtype(np.float32)


def dequantized(ctx: ImportContext, x: str, scale: str, zero_point: str, axis: int = 1) -> str:
    """(x - zp) * scale as a fresh float32 value."""
    out = ctx.graph.fresh(f"{ctx.name}:real")
    _general_cast(ctx, x, FLOAT, scale, zero_point, axis, out)
    return out


def quantized(ctx: ImportContext, real: str, scale: str, zero_point: str, like: str, output: str) -> None:
    """QuantizeLinear(real, scale, zero point) into `output`, of the zero point's type (of `like`'s without one)."""
    zero_point = zero_point or ctx.add_const(np.zeros((), ctx.value(like).dtype), "zero")
    if ctx.value(scale).dtype != FLOAT:
        scale = ctx.emit1("Cast", [scale], to=DataType.FLOAT32)
    _general_cast(ctx, real, ctx.value(zero_point).dtype, scale, zero_point, 1, output)


def _emulated(ctx: ImportContext, op_type: str, operands: list[tuple[str, str, str]], y_scale: str, y_zp: str,
              opset: int | None = None, **attrs) -> None:
    """op_type on the dequantized operands (x, scale, zero point), quantized to the node's output."""
    reals = [dequantized(ctx, *operand) for operand in operands]
    y = ctx.graph.fresh(f"{ctx.name}:{op_type}")
    ctx.delegate(op_type, reals, [y], opset, **attrs)
    quantized(ctx, y, y_scale, y_zp, operands[0][0], ctx.outputs[0])


@onnx_op("QLinearAdd", "QLinearMul", domain=MICROSOFT)
def qlinear_binary(ctx: ImportContext) -> None:
    a, a_s, a_zp, b, b_s, b_zp, c_s, c_zp = (ctx.input(i) for i in range(8))
    _emulated(ctx, ctx.node.op_type.removeprefix("QLinear"), [(a, a_s, a_zp), (b, b_s, b_zp)], c_s, c_zp)


@onnx_op("QLinearSigmoid", "QLinearLeakyRelu", domain=MICROSOFT)
def qlinear_activation(ctx: ImportContext) -> None:
    x, x_s, x_zp, y_s, y_zp = (ctx.input(i) for i in range(5))
    op = ctx.node.op_type.removeprefix("QLinear")
    _emulated(ctx, op, [(x, x_s, x_zp)], y_s, y_zp, alpha=ctx.attr("alpha", 0.01) if op == "LeakyRelu" else None)


@onnx_op("QLinearSoftmax", domain=MICROSOFT)
def qlinear_softmax(ctx: ImportContext) -> None:
    """`opset` names the Softmax semantics (before 13: over the flattened trailing axes)."""
    x, x_s, x_zp, y_s, y_zp = (ctx.input(i) for i in range(5))
    _emulated(ctx, "Softmax", [(x, x_s, x_zp)], y_s, y_zp, opset=int(ctx.attr("opset", 13)),
              axis=ctx.attr("axis", -1))


@onnx_op("QLinearConcat", domain=MICROSOFT)
def qlinear_concat(ctx: ImportContext) -> None:
    """Inputs: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per operand."""
    ins = ctx.inputs
    if len(ins) < 5 or (len(ins) - 2) % 3:
        raise ctx.error(f"{len(ins)} inputs: expected Y_scale, Y_zero_point and triples (X, scale, zero point)")
    operands = [tuple(ins[k:k + 3]) for k in range(2, len(ins), 3)]
    _emulated(ctx, "Concat", operands, ins[0], ins[1], axis=ctx.attr("axis"))


@onnx_op("QLinearGlobalAveragePool", "QLinearAveragePool", domain=MICROSOFT)
def qlinear_pool(ctx: ImportContext) -> None:
    """`channels_last` inputs are NHWC: pooled on their NCHW view."""
    x, x_s, x_zp, y_s, y_zp = (ctx.input(i) for i in range(5))
    op = ctx.node.op_type.removeprefix("QLinear")
    attrs = {a.name: ctx.attr(a.name) for a in ctx.node.attribute if a.name != "channels_last"}
    real = dequantized(ctx, x, x_s, x_zp)
    last = bool(ctx.attr("channels_last", 0))
    if last:
        real = ctx.emit1("Transpose", [real], perm=[0, ctx.value(real).rank - 1, *range(1, ctx.value(real).rank - 1)])
    y = ctx.graph.fresh(f"{ctx.name}:{op}")
    ctx.delegate(op, [real], [y], **attrs)
    if last:
        rank = ctx.value(y).rank
        y = ctx.emit1("Transpose", [y], perm=[0, *range(2, rank), 1])
    quantized(ctx, y, y_s, y_zp, x, ctx.outputs[0])


def _matrix(ctx: ImportContext, x: str, zero_point: str, transposed: bool, column_axis: int) -> str:
    """x - zp as exact float32 integers (zp per column along `column_axis`), transposed when `transposed`."""
    real = _integers(ctx, x, zero_point, column_axis)
    return ctx.emit1("Transpose", [real], perm=[1, 0]) if transposed else real


def _scaled(ctx: ImportContext, acc: str, a_scale: str, b_scale: str, output: str, alpha: float = 1.0,
            bias: str = "") -> None:
    """acc * a_scale * b_scale (per column when b_scale is a vector) * alpha [+ bias] into `output`."""
    step = ctx.emit1("Mul", [a_scale, b_scale])
    if alpha != 1.0:
        step = ctx.emit1("Mul", [step, ctx.add_const(np.array(alpha, np.float32), "alpha")])
    if bias:
        y = ctx.emit1("Mul", [acc, step])
        ctx.emit("Add", [y, bias], [output])
    else:
        ctx.emit("Mul", [acc, step], [output])


@onnx_op("QGemm", domain=MICROSOFT)
def qgemm(ctx: ImportContext) -> None:
    """A, a_s, a_zp, B, b_s, b_zp, C (int32, scale a_s * b_s), y_s, y_zp: float output without y_s; b's params
    may be per output column."""
    a, a_s, a_zp, b, b_s, b_zp, c, y_s, y_zp = (ctx.input(i) for i in range(9))
    trans_a, trans_b = bool(ctx.attr("transA", 0)), bool(ctx.attr("transB", 0))
    alpha = float(ctx.attr("alpha", 1.0))
    acc = ctx.emit1("MatMul", [_matrix(ctx, a, a_zp, trans_a, 1), _matrix(ctx, b, b_zp, trans_b, 0 if trans_b else 1)])
    if c:
        acc = ctx.emit1("Add", [acc, ctx.emit1("Cast", [c], to=DataType.FLOAT32)])
    if not y_s:
        _scaled(ctx, acc, a_s, b_s, ctx.outputs[0], alpha)
        return
    if alpha != 1.0:
        a_s = ctx.emit1("Mul", [a_s, ctx.add_const(np.array(alpha, np.float32), "alpha")])
    _requantize_float(ctx, acc, a_s, b_s, y_s, y_zp or ctx.add_const(np.zeros((), ctx.value(a).dtype), "zero"), 1)


@onnx_op("MatMulIntegerToFloat", domain=MICROSOFT)
def matmul_integer_to_float(ctx: ImportContext) -> None:
    """A, B, a_scale, b_scale, a_zp, b_zp, bias: (A - a_zp) @ (B - b_zp) * a_scale * b_scale + bias."""
    a, b, a_s, b_s, a_zp, b_zp, bias = (ctx.input(i) for i in range(7))
    acc = ctx.emit1("MatMul", [_integers(ctx, a, a_zp), _integers(ctx, b, b_zp, ctx.value(b).rank - 1)])
    _scaled(ctx, acc, a_s, b_s, ctx.outputs[0], bias=bias)


@onnx_op("DynamicQuantizeMatMul", domain=MICROSOFT)
def dynamic_quantize_matmul(ctx: ImportContext) -> None:
    """A (float), B, b_scale, b_zp, bias: A quantized to uint8 as DynamicQuantizeLinear does, then
    MatMulIntegerToFloat."""
    a, b, b_s, b_zp, bias = (ctx.input(i) for i in range(5))
    q, a_s, a_zp = _dynamic_quantize(ctx, a)
    acc = ctx.emit1("MatMul", [_integers(ctx, q, a_zp), _integers(ctx, b, b_zp, ctx.value(b).rank - 1)])
    _scaled(ctx, acc, a_s, b_s, ctx.outputs[0], bias=bias)


def _dynamic_quantize(ctx: ImportContext, x: str) -> list[str]:
    """(uint8 x, scale, zero point) as ONNX DynamicQuantizeLinear computes them."""
    outs = [ctx.graph.fresh(f"{ctx.name}:{part}") for part in ("q", "scale", "zero_point")]
    ctx.delegate("DynamicQuantizeLinear", [x], outs)
    return outs


@onnx_op("QuantizeLinear", "DequantizeLinear", domain=MICROSOFT)
def contrib_quantize_linear(ctx: ImportContext) -> None:
    """onnxruntime's own QuantizeLinear / DequantizeLinear (its quantizer's `UseQDQContribOps`, for 16- and
    4-bit types before opset 21): the default-domain definitions at opset 21."""
    ctx.delegate(ctx.node.op_type, ctx.inputs, ctx.outputs, opset=21,
                 **{a.name: ctx.attr(a.name) for a in ctx.node.attribute})
