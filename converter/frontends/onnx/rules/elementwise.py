"""ONNX importer rules for elementwise math and reductions: Add, Sub, Mul, Div, Pow (numpy broadcasting, which
every opset from 7 uses); Sqrt, Exp, Log, Neg, Abs, Erf; variadic Min / Max / Sum / Mean -> chains of Minimum /
Maximum / Add (Mean then divides by n);
ReduceMean / ReduceSum / ReduceMax / ReduceMin / ReduceProd / ReduceL1 / ReduceL2 / ReduceLogSum /
ReduceLogSumExp / ReduceSumSquare -> Reduce with the axes as a constant int64 input.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op
from schema import fb

_SAME_NAME = ("Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Neg", "Abs", "Erf")


@onnx_op(*_SAME_NAME)
def elementwise(ctx: ImportContext) -> None:
    ctx.emit(ctx.node.op_type, ctx.inputs, ctx.outputs)


_VARIADIC = {"Min": "Minimum", "Max": "Maximum", "Sum": "Add", "Mean": "Add"}


@onnx_op(*_VARIADIC)
def variadic(ctx: ImportContext) -> None:
    """Min / Max / Sum of n inputs: a left-to-right chain of n - 1 binary nodes (one input: an identity);
    Mean divides the Sum by n."""
    op, inputs = _VARIADIC[ctx.node.op_type], [i for i in ctx.inputs if i]
    if not inputs:
        raise ctx.error("needs at least one input")
    mean = ctx.node.op_type == "Mean" and len(inputs) > 1
    acc = inputs[0]
    if len(inputs) == 1:
        ctx.emit("Identity", [acc], ctx.outputs)
    for k, operand in enumerate(inputs[1:], start=2):
        acc = ctx.emit1(op, [acc, operand], ctx.outputs[0] if k == len(inputs) and not mean else None)
    if mean:
        count = ctx.add_const(np.array(len(inputs), ctx.value(acc).dtype), "count")
        ctx.emit("Div", [acc, count], ctx.outputs)


# ONNX op -> (our mode, first opset whose axes are an input rather than an attribute)
_REDUCE = {
    "ReduceMean": (fb.ReduceMode.MEAN, 18),
    "ReduceSum": (fb.ReduceMode.SUM, 13),
    "ReduceMax": (fb.ReduceMode.MAX, 18),
    "ReduceMin": (fb.ReduceMode.MIN, 18),
    "ReduceProd": (fb.ReduceMode.PROD, 18),
    "ReduceL1": (fb.ReduceMode.L1, 18),
    "ReduceL2": (fb.ReduceMode.L2, 18),
    "ReduceLogSum": (fb.ReduceMode.LOG_SUM, 18),
    "ReduceLogSumExp": (fb.ReduceMode.LOG_SUM_EXP, 18),
    "ReduceSumSquare": (fb.ReduceMode.SUM_SQUARE, 18),
}


@onnx_op(*_REDUCE)
def reduce(ctx: ImportContext) -> None:
    """Absent or empty axes reduce everything, or, with noop_with_empty_axes, make an identity."""
    mode, axes_input_from = _REDUCE[ctx.node.op_type]
    x, keep_dims = ctx.input(0), bool(ctx.attr("keepdims", 1))
    if ctx.opset >= axes_input_from and ctx.input(1) and ctx.const(ctx.input(1)) is None:   # run-time axes
        ctx.emit("Reduce", [x, ctx.input(1)], ctx.outputs, mode=mode, keep_dims=keep_dims,
                 noop_with_empty_axes=bool(ctx.attr("noop_with_empty_axes", 0)))
        return
    axes = ctx.const(ctx.input(1)) if ctx.opset >= axes_input_from else ctx.attr("axes")
    empty = axes is None or np.size(axes) == 0
    if empty and ctx.attr("noop_with_empty_axes", 0):
        ctx.emit("Identity", [x], ctx.outputs)
        return
    inputs = [x] if empty else [x, ctx.add_const(np.asarray(axes, np.int64).reshape(-1), "axes")]
    ctx.emit("Reduce", inputs, ctx.outputs, mode=mode, keep_dims=keep_dims)
