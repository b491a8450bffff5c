"""ONNX importer rules for the normalisations beyond Batch/LayerNormalization: InstanceNormalization and
GroupNormalization -> GroupNorm; LpNormalization and MeanVarianceNormalization, spelled out with Reduce and
elementwise nodes (the layout pass moves transposes through all of them)."""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite.status import InvalidOpAttrError
from schema import fb

R = fb.ReduceMode


@onnx_op("InstanceNormalization")
def instance_normalization(ctx: ImportContext) -> None:
    x = ctx.value(ctx.input(0))
    if x.rank < 2 or x.shape[1] < 1:
        raise ctx.error(f"input shape {list(x.shape)} has no known channel axis 1")
    ctx.emit("GroupNorm", ctx.inputs[:3], ctx.outputs, num_groups=x.shape[1],
             epsilon=float(ctx.attr("epsilon", 1e-5)), axis=1)


@onnx_op("GroupNormalization")
def group_normalization(ctx: ImportContext) -> None:
    """Opset 18 gives scale and bias per group, opset 21 per channel: per-group constants are repeated per
    channel."""
    groups = ctx.attr("num_groups")
    if groups is None:
        raise ctx.error("attribute 'num_groups' is required", InvalidOpAttrError)
    x, scale, bias = ctx.input(0), ctx.input(1), ctx.input(2)
    channels = ctx.value(x).shape[1] if ctx.value(x).rank > 1 else -1
    if ctx.opset < 21 and channels != groups:
        if channels < 1 or channels % max(int(groups), 1):
            raise ctx.error(f"num_groups {groups} must be positive and divide the {channels} channels",
                            InvalidOpAttrError)
        per_channel = []
        for name, what in ((scale, "scale"), (bias, "bias")):
            value = ctx.require_const(name, f"per-group {what} (opset < 21)")
            per_channel.append(ctx.add_const(np.repeat(value, channels // int(groups)), what))
        scale, bias = per_channel
    ctx.emit("GroupNorm", [x, scale, bias], ctx.outputs, num_groups=int(groups),
             epsilon=float(ctx.attr("epsilon", 1e-5)), axis=1)


@onnx_op("LpNormalization")
def lp_normalization(ctx: ImportContext) -> None:
    """x / ||x||_p along axis; a zero norm (x all zeros) divides by the smallest subnormal, giving 0 as ONNX's
    reference does, where a plain division would give NaN."""
    x, p, axis = ctx.input(0), int(ctx.attr("p", 2)), int(ctx.attr("axis", -1))
    if p not in (1, 2):
        raise ctx.error(f"p must be 1 or 2, got {p}", InvalidOpAttrError)
    dtype = ctx.value(x).dtype
    axes = ctx.add_const(np.array([axis], np.int64), "axes")
    norm = ctx.emit1("Reduce", [x, axes], mode=R.L1 if p == 1 else R.L2, keep_dims=True)
    tiny = ctx.add_const(np.array(np.finfo(dtype).smallest_subnormal, dtype), "tiny")
    ctx.emit("Div", [x, ctx.emit1("Maximum", [norm, tiny])], ctx.outputs)


@onnx_op("MeanVarianceNormalization")
def mean_variance_normalization(ctx: ImportContext) -> None:
    """(x - mean) / (sqrt(mean((x - mean)^2)) + 1e-9) over `axes` (default [0, 2, 3]), ONNX's function body
    with the variance taken from the centred values (no cancellation)."""
    x = ctx.input(0)
    dtype = ctx.value(x).dtype
    axes = ctx.add_const(np.array(ctx.attr("axes", [0, 2, 3]), np.int64), "axes")
    mean = ctx.emit1("Reduce", [x, axes], mode=R.MEAN, keep_dims=True)
    centered = ctx.emit1("Sub", [x, mean])
    variance = ctx.emit1("Reduce", [ctx.emit1("Mul", [centered, centered]), axes], mode=R.MEAN, keep_dims=True)
    epsilon = ctx.add_const(np.array(1e-9, dtype), "epsilon")
    ctx.emit("Div", [centered, ctx.emit1("Add", [ctx.emit1("Sqrt", [variance]), epsilon])], ctx.outputs)
