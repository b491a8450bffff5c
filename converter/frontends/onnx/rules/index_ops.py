"""ONNX importer rules for the shape and index ops: broadcasting and tiling, ranges and one-hot codes,
triangles and eyes, block moves between depth and space, arg-extremes and top-k, element and N-D gathers and
scatters, and the data-dependent selections (NonZero, Compress, Unique).

Attributes that later opsets turned into inputs (TopK's k) become constant inputs, so each op has one form in the IR.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules.tensor_ops import _onnx_type_id, _trim
from lite.status import InvalidOpAttrError
from schema import fb

SCATTER_REDUCTIONS = {"none": fb.ScatterReduction.NONE, "add": fb.ScatterReduction.ADD,
                      "mul": fb.ScatterReduction.MUL, "max": fb.ScatterReduction.MAX,
                      "min": fb.ScatterReduction.MIN}
DEPTH_TO_SPACE_MODES = {"DCR": fb.DepthToSpaceMode.DCR, "CRD": fb.DepthToSpaceMode.CRD}


def _choice(ctx: ImportContext, name: str, default: str, choices: dict[str, int]) -> int:
    value = ctx.attr(name, default)
    if value not in choices:
        raise ctx.error(f"{name} '{value}' is not one of {', '.join(choices)}", InvalidOpAttrError)
    return choices[value]


# ---- broadcasting, tiling, ranges -------------------------------------------------------------------------------
@onnx_op("Expand")
def expand(ctx: ImportContext) -> None:
    ctx.emit("Expand", [ctx.input(0), ctx.input(1)], ctx.outputs)


@onnx_op("Tile")
def tile(ctx: ImportContext) -> None:
    ctx.emit("Tile", [ctx.input(0), ctx.input(1)], ctx.outputs)


@onnx_op("Range")
def range_(ctx: ImportContext) -> None:
    ctx.emit("Range", ctx.inputs, ctx.outputs)


@onnx_op("Size")
def size(ctx: ImportContext) -> None:
    """The product of x's dims: Shape, then a product over all of it (1 for a scalar)."""
    dims = ctx.emit1("Shape", [ctx.input(0)])
    ctx.emit("Reduce", [dims], ctx.outputs, mode=fb.ReduceMode.PROD, keep_dims=False)


@onnx_op("OneHot")
def one_hot(ctx: ImportContext) -> None:
    ctx.emit("OneHot", ctx.inputs, ctx.outputs, axis=ctx.attr("axis", -1))


# ---- triangles, eyes, block moves ---------------------------------------------------------------------------------
@onnx_op("Trilu")
def trilu(ctx: ImportContext) -> None:
    ctx.emit("Trilu", _trim(ctx.inputs), ctx.outputs, upper=bool(ctx.attr("upper", 1)))


@onnx_op("EyeLike")
def eye_like(ctx: ImportContext) -> None:
    data_type = _onnx_type_id(ctx, ctx.attr("dtype"), "EyeLike to") if ctx.has_attr("dtype") else 0
    ctx.emit("EyeLike", [ctx.input(0)], ctx.outputs, data_type=data_type, k=ctx.attr("k", 0))


@onnx_op("DepthToSpace")
def depth_to_space(ctx: ImportContext) -> None:
    mode = _choice(ctx, "mode", "DCR", DEPTH_TO_SPACE_MODES)
    ctx.emit("DepthToSpace", [ctx.input(0)], ctx.outputs, block_size=ctx.attr("blocksize", 0), mode=mode)


@onnx_op("SpaceToDepth")
def space_to_depth(ctx: ImportContext) -> None:
    mode = _choice(ctx, "mode", "DCR", DEPTH_TO_SPACE_MODES)
    ctx.emit("SpaceToDepth", [ctx.input(0)], ctx.outputs, block_size=ctx.attr("blocksize", 0), mode=mode)


# ---- extremes ---------------------------------------------------------------------------------------------------
@onnx_op("ArgMax", "ArgMin")
def arg_min_max(ctx: ImportContext) -> None:
    mode = fb.ArgMode.MAX if ctx.node.op_type == "ArgMax" else fb.ArgMode.MIN
    ctx.emit("ArgMinMax", [ctx.input(0)], ctx.outputs, mode=mode, axis=ctx.attr("axis", 0),
             keep_dims=bool(ctx.attr("keepdims", 1)), select_last_index=bool(ctx.attr("select_last_index", 0)))


@onnx_op("TopK")
def top_k(ctx: ImportContext) -> None:
    """TopK-1 gives k as an attribute, later opsets as an input; `largest` and `sorted` arrived in opset 11."""
    k = ctx.input(1) if ctx.opset >= 10 else ctx.add_const(np.array([ctx.attr("k")], np.int64), "k")
    ctx.emit("TopK", [ctx.input(0), k], ctx.outputs, axis=ctx.attr("axis", -1),
             largest=bool(ctx.attr("largest", 1)), sorted=bool(ctx.attr("sorted", 1)))


# ---- gathers and scatters ---------------------------------------------------------------------------------------
@onnx_op("GatherElements")
def gather_elements(ctx: ImportContext) -> None:
    ctx.emit("GatherElements", ctx.inputs, ctx.outputs, axis=ctx.attr("axis", 0))


@onnx_op("GatherND")
def gather_nd(ctx: ImportContext) -> None:
    ctx.emit("GatherND", ctx.inputs, ctx.outputs, batch_dims=ctx.attr("batch_dims", 0))


@onnx_op("ScatterElements", "Scatter")
def scatter_elements(ctx: ImportContext) -> None:
    """Scatter (opsets 9-10) is ScatterElements without a reduction."""
    reduction = _choice(ctx, "reduction", "none", SCATTER_REDUCTIONS)
    ctx.emit("ScatterElements", ctx.inputs, ctx.outputs, axis=ctx.attr("axis", 0), reduction=reduction)


@onnx_op("ScatterND")
def scatter_nd(ctx: ImportContext) -> None:
    ctx.emit("ScatterND", ctx.inputs, ctx.outputs, reduction=_choice(ctx, "reduction", "none", SCATTER_REDUCTIONS))


# ---- selections with data-dependent sizes, sequences, crops, images -----------------------------------------------
@onnx_op("NonZero")
def non_zero(ctx: ImportContext) -> None:
    ctx.emit("NonZero", [ctx.input(0)], ctx.outputs)


@onnx_op("Compress")
def compress(ctx: ImportContext) -> None:
    """No axis: the condition selects entries of the flattened input."""
    ctx.emit("Compress", ctx.inputs, ctx.outputs, axis=ctx.attr("axis", 0), flatten=not ctx.has_attr("axis"))


@onnx_op("Unique")
def unique(ctx: ImportContext) -> None:
    """The op always writes all four outputs; those the model omits get throwaway names."""
    outputs = [o or ctx.graph.fresh(f"{ctx.name}:unused_{k}") for k, o in enumerate(ctx.outputs + [""] * 4)][:4]
    ctx.emit("Unique", [ctx.input(0)], outputs, sorted=bool(ctx.attr("sorted", 1)), axis=ctx.attr("axis", 0),
             axis_set=ctx.has_attr("axis"))


@onnx_op("ReverseSequence")
def reverse_sequence(ctx: ImportContext) -> None:
    ctx.emit("ReverseSequence", ctx.inputs, ctx.outputs, batch_axis=ctx.attr("batch_axis", 1),
             time_axis=ctx.attr("time_axis", 0))


@onnx_op("CenterCropPad")
def center_crop_pad(ctx: ImportContext) -> None:
    ctx.emit("CenterCropPad", ctx.inputs, ctx.outputs, axes=list(ctx.attr("axes", [])))


@onnx_op("Col2Im")
def col2im(ctx: ImportContext) -> None:
    ctx.emit("Col2Im", ctx.inputs, ctx.outputs, dilations=list(ctx.attr("dilations", [])),
             pads=list(ctx.attr("pads", [])), strides=list(ctx.attr("strides", [])))
