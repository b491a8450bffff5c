"""TFLite importer rules for comparisons, logic and selection: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER,
GREATER_EQUAL -> Compare (NOT_EQUAL as EQUAL then NOT); LOGICAL_AND / OR / NOT, BITWISE_XOR -> Bitwise; SELECT,
SELECT_V2 -> Where; RIGHT_SHIFT -> Bitwise (unsigned) or an exact floor division (signed).

Quantized comparison operands are compared as reals (the importer dequantizes them), which is TFLite's rule:
its int8 comparisons rescale both sides to a common scale first.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from schema import fb

C, B = fb.CompareMode, fb.BitwiseMode
_COMPARE = {"EQUAL": C.EQUAL, "LESS": C.LESS, "LESS_EQUAL": C.LESS_EQUAL, "GREATER": C.GREATER,
            "GREATER_EQUAL": C.GREATER_EQUAL}
_BITWISE = {"LOGICAL_AND": B.AND, "LOGICAL_OR": B.OR, "LOGICAL_NOT": B.NOT, "BITWISE_XOR": B.XOR}


@tflite_op(*_COMPARE)
def compare(ctx: ImportContext) -> None:
    ctx.emit("Compare", ctx.inputs[:2], ctx.outputs, mode=_COMPARE[ctx.op.op])


@tflite_op("NOT_EQUAL")
def not_equal(ctx: ImportContext) -> None:
    equal = ctx.emit1("Compare", ctx.inputs[:2], mode=C.EQUAL)
    ctx.emit("Bitwise", [equal], ctx.outputs, mode=B.NOT)


@tflite_op(*_BITWISE)
def bitwise(ctx: ImportContext) -> None:
    ctx.emit("Bitwise", ctx.inputs, ctx.outputs, mode=_BITWISE[ctx.op.op])


@tflite_op("RIGHT_SHIFT")
def right_shift(ctx: ImportContext) -> None:
    """Logical for unsigned x (our Bitwise SHIFT_RIGHT); arithmetic for signed x, which is floor(x / 2^s):
    (x - x mod 2^s) / 2^s divides exactly, so the truncating integer Div gives the floor."""
    x, shift = ctx.inputs[:2]
    dtype = ctx.value(x).dtype
    if dtype.kind == "u":
        ctx.emit("Bitwise", [x, shift], ctx.outputs, mode=B.SHIFT_RIGHT)
        return
    power = ctx.emit1("Pow", [ctx.add_const(np.array(2, dtype), "two"), shift])
    exact = ctx.emit1("Sub", [x, ctx.emit1("Mod", [x, power], fmod=False)])
    ctx.emit("Div", [exact, power], ctx.outputs)


@tflite_op("SELECT", "SELECT_V2", quant="same")
def select(ctx: ImportContext) -> None:
    """Inputs: condition, x, y. SELECT_V2 broadcasts all three; SELECT also takes a rank-1 condition that picks
    whole rows of higher-rank x and y, which becomes a condition of shape [n, 1, ...]. int8 x and y pass
    through when they and the output share their params (else the importer runs it in float)."""
    condition, x, y = ctx.inputs[:3]
    rank = max(ctx.value(x).rank, ctx.value(y).rank)
    if ctx.op.op == "SELECT" and ctx.value(condition).rank == 1 and rank > 1:
        shape = ctx.add_const(np.array([-1] + [1] * (rank - 1), np.int64), "shape")
        condition = ctx.emit1("Reshape", [condition, shape], ctx.graph.fresh(f"{ctx.name}:condition"))
    ctx.emit("Where", [condition, x, y], ctx.outputs)
