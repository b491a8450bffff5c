"""MINDIR rules for shape and indexing primitives: Reshape, Flatten, Transpose, Concat, Stack, Split, Squeeze,
ExpandDims, Gather, Slice, StridedSlice, ReverseV2, Tile, PadV3, Argmax, Identity, Dropout (an identity in
inference); the resizes ResizeNearestNeighborV2 and ResizeBilinearV2."""
from __future__ import annotations

import numpy as np

from converter.frontends.mindir.registry import ImportContext, mindir_op
from converter.frontends.mindir.rules.elementwise import numpy_type
from lite import dtypes
from schema import fb

INT64_MAX = np.iinfo(np.int64).max
PAD_MODES = {"constant": fb.PaddingFill.CONSTANT, "reflect": fb.PaddingFill.REFLECT, "edge": fb.PaddingFill.EDGE}
T = fb.CoordinateTransform
# (align_corners, half_pixel_centers) -> where an output pixel samples the input, as TensorFlow's resizes
RESIZE_TRANSFORMS = {(False, False): T.ASYMMETRIC, (True, False): T.ALIGN_CORNERS, (False, True): T.HALF_PIXEL}


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


@mindir_op("Stack")
def stack(ctx: ImportContext) -> None:
    """The tuple's tensors joined along a new axis."""
    axis = int(ctx.arg(1, "axis", 0))
    axes = ctx.add_const(np.array([axis], np.int64), "axis")
    ctx.emit("Concat", [ctx.emit1("Unsqueeze", [t, axes]) for t in ctx.tensors(0)], [ctx.output], axis=axis)


@mindir_op("Split")
def split(ctx: ImportContext) -> None:
    """Inputs x, axis, output_num: equal parts, the tuple's items."""
    x, axis, parts = ctx.input(0), int(ctx.arg(1, "axis", 0)), int(ctx.arg(2, "output_num", 1))
    dim = ctx.value(x).shape[axis]
    if dim < 0 or dim % parts:
        raise ctx.error(f"dim {dim} of axis {axis} does not split into {parts} equal parts")
    sizes = ctx.add_const(np.full(parts, dim // parts, np.int64), "sizes")
    ctx.emit("Split", [x, sizes], [ctx.item(k) for k in range(parts)], axis=axis)


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


@mindir_op("Slice")
def slice_(ctx: ImportContext) -> None:
    """Inputs x, begin, size (-1: to the end of the axis)."""
    begin, size = _ints(ctx, 1, "begin"), _ints(ctx, 2, "size")
    ends = np.where(size < 0, INT64_MAX, begin + size)
    params = [ctx.add_const(v, hint) for v, hint in ((begin, "starts"), (ends, "ends"),
                                                      (np.arange(begin.size, dtype=np.int64), "axes"))]
    ctx.emit("Slice", [ctx.input(0), *params], [ctx.output])


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


@mindir_op("Tile")
def tile(ctx: ImportContext) -> None:
    """Multiples for the trailing axes (a shorter tuple leaves the leading axes as they are)."""
    x = ctx.input(0)
    multiples = _ints(ctx, 1, "multiples")
    rank = ctx.value(x).rank
    if multiples.size > rank:
        raise ctx.error(f"{multiples.size} multiples for an input of rank {rank}")
    repeats = np.concatenate([np.ones(rank - multiples.size, np.int64), multiples])
    ctx.emit("Tile", [x, ctx.add_const(repeats, "repeats")], [ctx.output])


@mindir_op("PadV3")
def pad(ctx: ImportContext) -> None:
    """Inputs x, paddings ((begin, end) pairs from the last axis backwards), the fill value; `mode` attribute."""
    x = ctx.input(0)
    rank = ctx.value(x).rank
    if not ctx.attrs.get("paddings_contiguous", True):
        raise ctx.error("paddings_contiguous=False is not supported")
    pairs = _ints(ctx, 1, "paddings").reshape(-1, 2)[::-1]
    pairs = np.concatenate([np.zeros((rank - len(pairs), 2), np.int64), pairs])
    mode = str(ctx.attrs.get("mode", "constant")).lower()
    if mode not in PAD_MODES or len(pairs) != rank:
        raise ctx.error(f"padding {pairs.tolist()} in mode '{mode}' is not supported for rank {rank}")
    pads = ctx.add_const(np.concatenate([pairs[:, 0], pairs[:, 1]]), "pads")
    value = ctx.input(2) if mode == "constant" else ""
    ctx.emit("Pad", [x, pads] + ([value] if value else []), [ctx.output], mode=PAD_MODES[mode])


@mindir_op("Argmax", "Argmin")
def arg_extreme(ctx: ImportContext) -> None:
    """Inputs x, axis, output_type (int32 or int64); the axis is dropped."""
    mode = fb.ArgMode.MAX if ctx.op == "Argmax" else fb.ArgMode.MIN
    dtype = numpy_type(ctx.arg(2, "output_type", np.dtype(np.int32)))
    if dtype is None:
        raise ctx.error(f"output type {ctx.arg(2, 'output_type')!r} is not supported")
    y = ctx.emit1("ArgMinMax", [ctx.input(0)], ctx.output if dtype == np.int64 else None, mode=mode,
                  axis=int(ctx.arg(1, "axis", -1)), keep_dims=False, select_last_index=False)
    if dtype != np.int64:
        ctx.emit("Cast", [y], [ctx.output], to=dtypes.from_numpy(dtype))


@mindir_op("ResizeNearestNeighborV2", "ResizeBilinearV2")
def resize(ctx: ImportContext) -> None:
    """Inputs x (NCHW), size (H, W), align_corners, half_pixel_centers."""
    x = ctx.input(0)
    n, c = ctx.value(x).shape[:2]
    size = np.concatenate([[n, c], _ints(ctx, 1, "size")]).astype(np.int64)
    corners = (bool(ctx.arg(2, "align_corners", False)), bool(ctx.arg(3, "half_pixel_centers", False)))
    if corners not in RESIZE_TRANSFORMS:
        raise ctx.error("align_corners and half_pixel_centers together are not supported")
    nearest = ctx.op == "ResizeNearestNeighborV2"
    attrs = dict(mode=fb.ResizeMode.NEAREST if nearest else fb.ResizeMode.LINEAR,
                 coordinate_transform=RESIZE_TRANSFORMS[corners])
    if nearest:     # TensorFlow's rules: round half up when aligning corners, else floor (centres: at x + 0.5)
        attrs.update(coordinate_transform=T.TF_HALF_PIXEL_FOR_NN if corners[1] else attrs["coordinate_transform"],
                     nearest_rounding=fb.NearestRounding.ROUND_PREFER_CEIL if corners[0]
                     else fb.NearestRounding.FLOOR)
    ctx.emit("Resize", [x, "", "", ctx.add_const(size, "sizes")], [ctx.output], **attrs)


@mindir_op("Identity")
def identity(ctx: ImportContext) -> None:
    ctx.emit("Identity", [ctx.input(0)], [ctx.output])


@mindir_op("Dropout")
def dropout(ctx: ImportContext) -> None:
    """MindSpore's Dropout returns (output, mask): output 0 is our Dropout of ratio 1 - keep_prob, the identity in
    inference and random in a training graph (a training step's network keeps MindSpore's)."""
    keep = float(np.ravel(ctx.arg(1, "keep_prob", 0.5))[0])
    ctx.emit("Dropout", [ctx.input(0)], [ctx.item(0)], ratio=1.0 - keep)
