"""ONNX importer rules for tensor plumbing: constants, identities, layout and shape manipulation."""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op


@onnx_op("Constant")
def constant(ctx: ImportContext) -> None:
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if ctx.has_attr(key):
            array = np.asarray(ctx.attr(key))
            if key.startswith("value_float"):
                array = array.astype(np.float32)
            elif key.startswith("value_int"):
                array = array.astype(np.int64)
            name = ctx.graph.add_const(array, ctx.outputs[0])
            if name != ctx.outputs[0]:
                raise ctx.error(f"output name '{ctx.outputs[0]}' is already taken")
            return
    raise ctx.error("only tensor, float(s) and int(s) constants are supported")


@onnx_op("Identity")
def identity(ctx: ImportContext) -> None:
    ctx.emit("Identity", [ctx.input(0)], ctx.outputs)


@onnx_op("Transpose")
def transpose(ctx: ImportContext) -> None:
    rank = ctx.value(ctx.input(0)).rank
    perm = ctx.attr("perm", list(range(rank))[::-1])
    ctx.emit("Transpose", [ctx.input(0)], ctx.outputs, perm=list(perm))
