"""ONNX importer rules for comparison and logic: Equal / Greater / GreaterOrEqual / Less / LessOrEqual ->
Compare{mode}; And / Or / Xor / Not (bool) and BitwiseAnd / Or / Xor / Not, BitShift -> Bitwise{mode};
Where; IsNaN / IsInf -> FloatClass{mode}; BitCast.

Every opset of these ops broadcasts numpy-style except opset 1's legacy `broadcast` / `axis` attributes, which
are refused unless they mean numpy broadcasting (trailing alignment).
"""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules.tensor_ops import _onnx_type_id
from lite.status import InvalidOpAttrError
from schema import fb

C, B = fb.CompareMode, fb.BitwiseMode
_COMPARE = {"Equal": C.EQUAL, "Greater": C.GREATER, "GreaterOrEqual": C.GREATER_EQUAL, "Less": C.LESS,
            "LessOrEqual": C.LESS_EQUAL}
_BITWISE = {"And": B.AND, "Or": B.OR, "Xor": B.XOR, "Not": B.NOT, "BitwiseAnd": B.AND, "BitwiseOr": B.OR,
            "BitwiseXor": B.XOR, "BitwiseNot": B.NOT}
_SHIFTS = {"LEFT": B.SHIFT_LEFT, "RIGHT": B.SHIFT_RIGHT}


def _check_legacy_broadcast(ctx: ImportContext) -> None:
    """Opset-1 binary ops broadcast only with broadcast=1, and along `axis`: numpy's rule is axis = rank(a) -
    rank(b) (or no axis)."""
    if not ctx.attr("broadcast", 0) or not ctx.has_attr("axis") or len(ctx.inputs) < 2:
        return
    a, b = ctx.value(ctx.input(0)).rank, ctx.value(ctx.input(1)).rank
    if int(ctx.attr("axis")) % max(a, 1) != a - b:
        raise ctx.error(f"legacy broadcast along axis {ctx.attr('axis')} is not supported")


@onnx_op(*_COMPARE)
def compare(ctx: ImportContext) -> None:
    _check_legacy_broadcast(ctx)
    ctx.emit("Compare", ctx.inputs[:2], ctx.outputs, mode=_COMPARE[ctx.node.op_type])


@onnx_op(*_BITWISE)
def bitwise(ctx: ImportContext) -> None:
    _check_legacy_broadcast(ctx)
    mode = _BITWISE[ctx.node.op_type]
    ctx.emit("Bitwise", ctx.inputs[:1 if mode == B.NOT else 2], ctx.outputs, mode=mode)


@onnx_op("BitShift")
def bit_shift(ctx: ImportContext) -> None:
    direction = ctx.attr("direction", "")
    if direction not in _SHIFTS:
        raise ctx.error(f"direction '{direction}' is not LEFT or RIGHT", InvalidOpAttrError)
    ctx.emit("Bitwise", ctx.inputs[:2], ctx.outputs, mode=_SHIFTS[direction])


@onnx_op("Where")
def where(ctx: ImportContext) -> None:
    ctx.emit("Where", ctx.inputs[:3], ctx.outputs)


@onnx_op("IsNaN")
def is_nan(ctx: ImportContext) -> None:
    ctx.emit("FloatClass", [ctx.input(0)], ctx.outputs, mode=fb.FloatClassMode.NAN)


@onnx_op("IsInf")
def is_inf(ctx: ImportContext) -> None:
    ctx.emit("FloatClass", [ctx.input(0)], ctx.outputs, mode=fb.FloatClassMode.INF,
             detect_positive=bool(ctx.attr("detect_positive", 1)), detect_negative=bool(ctx.attr("detect_negative", 1)))


@onnx_op("BitCast")
def bit_cast(ctx: ImportContext) -> None:
    ctx.emit("BitCast", [ctx.input(0)], ctx.outputs, to=_onnx_type_id(ctx, ctx.attr("to"), "BitCast to"))
