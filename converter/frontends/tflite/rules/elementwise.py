"""TFLite importer rules for elementwise and reduction builtins.

ADD / SUB / MUL / DIV keep their fused activation; ADD and MUL on int8 tensors run on our int8 kernels (TFLite's
integer schemes), the rest in float between int8 neighbours. SQUARED_DIFFERENCE, SQUARE and RSQRT are spelled
out of Sub / Mul / Sqrt / Div. MEAN, SUM, REDUCE_MAX/MIN/PROD -> Reduce with the axes input.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from schema import fb

_FUSED = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul", "DIV": "Div"}
_PLAIN = {"MAXIMUM": "Maximum", "MINIMUM": "Minimum", "POW": "Pow", "SQRT": "Sqrt", "EXP": "Exp", "LOG": "Log",
          "ABS": "Abs", "NEG": "Neg"}
_REDUCE = {"MEAN": fb.ReduceMode.MEAN, "SUM": fb.ReduceMode.SUM, "REDUCE_MAX": fb.ReduceMode.MAX,
           "REDUCE_MIN": fb.ReduceMode.MIN, "REDUCE_PROD": fb.ReduceMode.PROD}


@tflite_op("ADD", "MUL", quant="int8")
def add_mul(ctx: ImportContext) -> None:
    ctx.emit_fused(_FUSED[ctx.op.op], ctx.inputs[:2])


@tflite_op("SUB", "DIV")
def sub_div(ctx: ImportContext) -> None:
    ctx.emit_fused(_FUSED[ctx.op.op], ctx.inputs[:2])


@tflite_op(*_PLAIN)
def plain(ctx: ImportContext) -> None:
    ctx.emit(_PLAIN[ctx.op.op], ctx.inputs, ctx.outputs)


@tflite_op("SQUARED_DIFFERENCE")
def squared_difference(ctx: ImportContext) -> None:
    d = ctx.emit1("Sub", ctx.inputs[:2])
    ctx.emit("Mul", [d, d], ctx.outputs)


@tflite_op("SQUARE")
def square(ctx: ImportContext) -> None:
    ctx.emit("Mul", [ctx.input(0), ctx.input(0)], ctx.outputs)


@tflite_op("RSQRT")
def rsqrt(ctx: ImportContext) -> None:
    one = ctx.add_const(np.ones((), ctx.value(ctx.input(0)).dtype), "one")
    ctx.emit("Div", [one, ctx.emit1("Sqrt", [ctx.input(0)])], ctx.outputs)


@tflite_op(*_REDUCE)
def reduce(ctx: ImportContext) -> None:
    axes = ctx.add_const(np.array(ctx.int_list(ctx.input(1), "axes"), np.int64), "axes")
    ctx.emit("Reduce", [ctx.input(0), axes], ctx.outputs, mode=_REDUCE[ctx.op.op],
             keep_dims=bool(ctx.opt("KeepDims", False)), noop_with_empty_axes=True)
