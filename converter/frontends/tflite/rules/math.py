"""TFLite importer rules for elementwise math beyond arithmetic: FLOOR, CEIL, ROUND, SIN, COS, SIGN ->
UnaryMath; FLOOR_DIV, FLOOR_MOD -> Mod (Python's remainder, the divisor's sign) and Div; ATAN2 spelled out of
UnaryMath ATAN and Where; FAKE_QUANT spelled out of clamps and FLOOR; CUMSUM -> Cumulative; ADD_N -> a chain
of Add; REDUCE_ANY / REDUCE_ALL -> Reduce MAX / MIN on bool; BUCKETIZE -> a count of the boundaries each value
reaches.

ROUND rounds half to even, as TFLite does (and numpy's rint).
"""
from __future__ import annotations

import math

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from lite.dtypes import from_numpy
from schema import fb

U, C = fb.UnaryMathMode, fb.CompareMode
_UNARY = {"FLOOR": U.FLOOR, "CEIL": U.CEIL, "ROUND": U.ROUND, "SIN": U.SIN, "COS": U.COS, "SIGN": U.SIGN}
_ANY_ALL = {"REDUCE_ANY": fb.ReduceMode.MAX, "REDUCE_ALL": fb.ReduceMode.MIN}


@tflite_op(*_UNARY)
def unary_math(ctx: ImportContext) -> None:
    ctx.emit("UnaryMath", [ctx.input(0)], ctx.outputs, mode=_UNARY[ctx.op.op])


@tflite_op("FLOOR_MOD")
def floor_mod(ctx: ImportContext) -> None:
    ctx.emit("Mod", ctx.inputs[:2], ctx.outputs, fmod=False)


@tflite_op("FLOOR_DIV")
def floor_div(ctx: ImportContext) -> None:
    """floor(a / b) for floats; for integers (a - a mod b) / b, which divides exactly, so the truncating integer
    division gives the floor."""
    a, b = ctx.inputs[:2]
    if ctx.value(a).dtype.kind == "f":
        ctx.emit("UnaryMath", [ctx.emit1("Div", [a, b])], ctx.outputs, mode=U.FLOOR)
        return
    ctx.emit("Div", [ctx.emit1("Sub", [a, ctx.emit1("Mod", [a, b], fmod=False)]), b], ctx.outputs)


@tflite_op("ATAN2")
def atan2(ctx: ImportContext) -> None:
    """atan2(y, x) = atan(y / x), plus pi (y >= 0) or -pi (y < 0) where x < 0, and sign(y) * pi / 2 where x = 0."""
    y, x = ctx.inputs[:2]
    dtype = ctx.value(y).dtype

    def scalar(value: float) -> str:
        return ctx.add_const(np.array(value, dtype))

    zero = scalar(0.0)
    half_turn = ctx.emit1("Where", [ctx.emit1("Compare", [y, zero], mode=C.GREATER_EQUAL), scalar(math.pi),
                                    scalar(-math.pi)])
    shift = ctx.emit1("Where", [ctx.emit1("Compare", [x, zero], mode=C.LESS), half_turn, zero])
    angle = ctx.emit1("Add", [ctx.emit1("UnaryMath", [ctx.emit1("Div", [y, x])], mode=U.ATAN), shift])
    axis = ctx.emit1("Mul", [ctx.emit1("UnaryMath", [y], mode=U.SIGN), scalar(math.pi / 2)])
    ctx.emit("Where", [ctx.emit1("Compare", [x, zero], mode=C.EQUAL), axis, angle], ctx.outputs)


@tflite_op("FAKE_QUANT")
def fake_quant(ctx: ImportContext) -> None:
    """TF's fake quantization with its nudged range: the zero point rounded onto the integer grid, then
    y = floor((clamp(x, lo, hi) - lo) / scale + 0.5) * scale + lo."""
    if ctx.opt("NarrowRange", False):
        raise ctx.error("narrow_range fake quantization is not supported (LiteRT refuses it on activations too)")
    q_min, q_max = 0.0, float(2 ** int(ctx.opt("NumBits", 8)) - 1)
    low, high = float(ctx.opt("Min", 0.0)), float(ctx.opt("Max", 0.0))
    if not low <= 0.0 <= high or low == high:
        raise ctx.error(f"range [{low}, {high}] must contain 0 and not be empty")
    scale = (high - low) / (q_max - q_min)
    zero_point = min(max(math.floor(q_min - low / scale + 0.5), q_min), q_max)
    lo, hi = (q_min - zero_point) * scale, (q_max - zero_point) * scale
    x = ctx.input(0)

    def scalar(value: float) -> str:
        return ctx.add_const(np.array(value, ctx.value(x).dtype))

    clamped = ctx.emit1("Minimum", [ctx.emit1("Maximum", [x, scalar(lo)]), scalar(hi)])
    steps = ctx.emit1("Add", [ctx.emit1("Div", [ctx.emit1("Sub", [clamped, scalar(lo)]), scalar(scale)]), scalar(0.5)])
    grid = ctx.emit1("UnaryMath", [steps], mode=U.FLOOR)
    ctx.emit("Add", [ctx.emit1("Mul", [grid, scalar(scale)]), scalar(lo)], ctx.outputs)


@tflite_op("CUMSUM")
def cumsum(ctx: ImportContext) -> None:
    axis = ctx.add_const(np.array(ctx.int_list(ctx.input(1), "axis")[0], np.int64), "axis")
    ctx.emit("Cumulative", [ctx.input(0), axis], ctx.outputs, mode=fb.CumulativeMode.SUM,
             exclusive=bool(ctx.opt("Exclusive", False)), reverse=bool(ctx.opt("Reverse", False)))


@tflite_op("ADD_N")
def add_n(ctx: ImportContext) -> None:
    total = ctx.input(0)
    for k, x in enumerate(ctx.inputs[1:], 2):
        total = ctx.emit1("Add", [total, x], ctx.outputs[0] if k == len(ctx.inputs) else None)
    if len(ctx.inputs) == 1:
        ctx.emit("Identity", [total], ctx.outputs)


@tflite_op(*_ANY_ALL)
def reduce_any_all(ctx: ImportContext) -> None:
    axes = ctx.add_const(np.array(ctx.int_list(ctx.input(1), "axes"), np.int64), "axes")
    ctx.emit("Reduce", [ctx.input(0), axes], ctx.outputs, mode=_ANY_ALL[ctx.op.op],
             keep_dims=bool(ctx.opt("KeepDims", False)), noop_with_empty_axes=True)


@tflite_op("BUCKETIZE")
def bucketize(ctx: ImportContext) -> None:
    """The bucket of x is the number of (sorted) boundaries b with x >= b; integer x is compared in float64,
    exactly, with the float boundaries."""
    x = ctx.input(0)
    if ctx.value(x).dtype.kind != "f":
        x = ctx.emit1("Cast", [x], to=from_numpy(np.dtype(np.float64)))
    boundaries = ctx.add_const(np.asarray(ctx.opt("Boundaries", []), ctx.value(x).dtype), "boundaries")
    reached = ctx.emit1("Compare", [ctx.emit1("Unsqueeze", [x, ctx.add_const(np.array([-1], np.int64), "axes")]),
                                    boundaries], mode=C.GREATER_EQUAL)
    counts = ctx.emit1("Cast", [reached], to=from_numpy(ctx.value(ctx.outputs[0]).dtype))
    ctx.emit("Reduce", [counts, ctx.add_const(np.array([-1], np.int64), "axes")], ctx.outputs,
             mode=fb.ReduceMode.SUM, keep_dims=False)
