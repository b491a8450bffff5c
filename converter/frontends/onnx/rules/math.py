"""ONNX importer rules for elementwise math and its relatives: Floor, Ceil, Round, Reciprocal, Sign and the
trigonometric / hyperbolic functions -> UnaryMath{mode}; Mod; CumSum / CumProd -> Cumulative{mode}; Einsum;
Det. (Hardmax sits with Softmax in nn.py: it shares the pre-13 2-D coercion.)"""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite.status import InvalidOpAttrError
from schema import fb

U = fb.UnaryMathMode
_UNARY = {"Floor": U.FLOOR, "Ceil": U.CEIL, "Round": U.ROUND, "Reciprocal": U.RECIPROCAL, "Sign": U.SIGN,
          "Sin": U.SIN, "Cos": U.COS, "Tan": U.TAN, "Asin": U.ASIN, "Acos": U.ACOS, "Atan": U.ATAN,
          "Sinh": U.SINH, "Cosh": U.COSH, "Asinh": U.ASINH, "Acosh": U.ACOSH, "Atanh": U.ATANH}
_CUMULATIVE = {"CumSum": fb.CumulativeMode.SUM, "CumProd": fb.CumulativeMode.PROD}


@onnx_op(*_UNARY)
def unary_math(ctx: ImportContext) -> None:
    ctx.emit("UnaryMath", [ctx.input(0)], ctx.outputs, mode=_UNARY[ctx.node.op_type])


@onnx_op("Mod")
def mod(ctx: ImportContext) -> None:
    fmod = int(ctx.attr("fmod", 0))
    if fmod not in (0, 1):
        raise ctx.error(f"fmod must be 0 or 1, got {fmod}", InvalidOpAttrError)
    ctx.emit("Mod", ctx.inputs[:2], ctx.outputs, fmod=bool(fmod))


@onnx_op(*_CUMULATIVE)
def cumulative(ctx: ImportContext) -> None:
    flags = {name: int(ctx.attr(name, 0)) for name in ("exclusive", "reverse")}
    if any(v not in (0, 1) for v in flags.values()):
        raise ctx.error(f"exclusive and reverse must be 0 or 1, got {flags}", InvalidOpAttrError)
    ctx.emit("Cumulative", ctx.inputs[:2], ctx.outputs, mode=_CUMULATIVE[ctx.node.op_type],
             **{k: bool(v) for k, v in flags.items()})


@onnx_op("Einsum")
def einsum(ctx: ImportContext) -> None:
    equation = ctx.attr("equation")
    if not equation:
        raise ctx.error("attribute 'equation' is required", InvalidOpAttrError)
    ctx.emit("Einsum", ctx.inputs, ctx.outputs, equation=equation)


@onnx_op("Det")
def det(ctx: ImportContext) -> None:
    ctx.emit("Det", [ctx.input(0)], ctx.outputs)
