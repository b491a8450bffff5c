"""MINDIR rules for shape and indexing primitives: Reshape, Flatten, Transpose, Concat, Squeeze, ExpandDims,
Gather, StridedSlice, ReverseV2, Identity, Dropout (an identity in inference)."""
from __future__ import annotations

import numpy as np

from converter.frontends.mindir.registry import ImportContext, mindir_op

INT64_MAX = np.iinfo(np.int64).max


def _ints(ctx: ImportContext, k: int, name: str) -> np.ndarray:
    return np.ravel(np.asarray(ctx.arg(k, name, ()), np.int64))


@mindir_op("Reshape")
def reshape(ctx: ImportContext) -> None:
    ctx.emit("Reshape", [ctx.input(0), ctx.add_const(_ints(ctx, 1, "shape"), "shape")], [ctx.output])


@mindir_op("Flatten")
def flatten(ctx: ImportContext) -> None:
    """[N, ...] -> [N, prod(...)] (MindSpore's Flatten keeps the first axis)."""
    ctx.emit("Flatten", [ctx.input(0)], [ctx.output], axis=1)


@mindir_op("Transpose")
def transpose(ctx: ImportContext) -> None:
    ctx.emit("Transpose", [ctx.input(0)], [ctx.output], perm=[int(p) for p in _ints(ctx, 1, "perm")])


@mindir_op("Concat")
def concat(ctx: ImportContext) -> None:
    ctx.emit("Concat", ctx.tensors(0), [ctx.output], axis=int(ctx.arg(1, "axis", 0)))


@mindir_op("Squeeze")
def squeeze(ctx: ImportContext) -> None:
    """Empty axis squeezes every dim of size 1."""
    axes = _ints(ctx, 1, "axis")
    inputs = [ctx.input(0)] + ([ctx.add_const(axes, "axes")] if axes.size else [])
    ctx.emit("Squeeze", inputs, [ctx.output])


@mindir_op("ExpandDims")
def expand_dims(ctx: ImportContext) -> None:
    ctx.emit("Unsqueeze", [ctx.input(0), ctx.add_const(_ints(ctx, 1, "axis"), "axes")], [ctx.output])


@mindir_op("Gather")
def gather(ctx: ImportContext) -> None:
    """Inputs params, indices, axis, batch_dims (only 0)."""
    if int(ctx.arg(3, "batch_dims", 0)):
        raise ctx.error("batch_dims other than 0 is not supported")
    ctx.emit("Gather", [ctx.input(0), ctx.input(1)], [ctx.output], axis=int(ctx.arg(2, "axis", 0)))


@mindir_op("StridedSlice")
def strided_slice(ctx: ImportContext) -> None:
    """begin/end/strides with TensorFlow's masks: begin_mask and end_mask open a bound, shrink_axis_mask drops
    the axis after slicing it to one element; ellipsis_mask and new_axis_mask are refused."""
    x = ctx.input(0)
    begin, end, strides = (_ints(ctx, k, name) for k, name in ((1, "begin"), (2, "end"), (3, "strides")))
    masks = [int(ctx.arg(k, name, 0)) for k, name in ((4, "begin_mask"), (5, "end_mask"), (6, "ellipsis_mask"),
                                                      (7, "new_axis_mask"), (8, "shrink_axis_mask"))]
    begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_mask = masks
    if ellipsis_mask or new_axis_mask:
        raise ctx.error("ellipsis_mask and new_axis_mask are not supported")
    axes = np.arange(begin.size, dtype=np.int64)
    starts, ends = begin.copy(), end.copy()
    for a in axes:
        backwards = strides[a] < 0
        if begin_mask >> a & 1:
            starts[a] = -1 if backwards else 0
        if end_mask >> a & 1:
            ends[a] = -INT64_MAX if backwards else INT64_MAX
        if shrink_mask >> a & 1:
            ends[a] = starts[a] + 1 if starts[a] != -1 else INT64_MAX
            strides[a] = 1
    shrunk = [int(a) for a in axes if shrink_mask >> a & 1]
    params = [ctx.add_const(v, hint) for v, hint in ((starts, "starts"), (ends, "ends"), (axes, "axes"),
                                                      (strides, "steps"))]
    y = ctx.emit1("Slice", [x, *params], None if shrunk else ctx.output)
    if shrunk:
        ctx.emit("Squeeze", [y, ctx.add_const(np.array(shrunk, np.int64), "shrunk")], [ctx.output])


@mindir_op("ReverseV2")
def reverse(ctx: ImportContext) -> None:
    """Reverse along the given axes: a Slice stepping back from the last element."""
    axes = _ints(ctx, 1, "axis")
    ones = np.ones(axes.size, np.int64)
    params = [ctx.add_const(v, hint) for v, hint in ((-ones, "starts"), (-INT64_MAX * ones, "ends"), (axes, "axes"),
                                                      (-ones, "steps"))]
    ctx.emit("Slice", [ctx.input(0), *params], [ctx.output])


@mindir_op("Identity")
def identity(ctx: ImportContext) -> None:
    ctx.emit("Identity", [ctx.input(0)], [ctx.output])


@mindir_op("Dropout")
def dropout(ctx: ImportContext) -> None:
    """Output 0 is the input in inference (MindSpore's Dropout returns (output, mask))."""
    ctx.emit("Identity", [ctx.input(0)], [ctx.item(0)])
