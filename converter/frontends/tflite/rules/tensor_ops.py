"""TFLite importer rules for shape and data-movement builtins: RESHAPE, SQUEEZE, EXPAND_DIMS, SLICE,
STRIDED_SLICE, CONCATENATION, SPLIT, SPLIT_V, PACK, UNPACK, GATHER, DYNAMIC_UPDATE_SLICE, TRANSPOSE, PAD, PADV2,
MIRROR_PAD, RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR, CAST, BITCAST, SHAPE, FILL, ZEROS_LIKE, RANGE, RANK,
BROADCAST_ARGS.

Parameters that TFLite passes as int32 tensors (shape, axes, begin/end, paddings, sizes) must be constant (or
computable from static shapes); they become our int64 parameter inputs or attributes. Data movement keeps int8
tensors int8 when the output has the input's scale and zero point.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from lite.dtypes import from_numpy
from schema import fb

BIG = (1 << 63) - 1          # "to the end" for Slice (clamped to the dim, ONNX rules)


def _ints(ctx: ImportContext, values: list[int], hint: str) -> str:
    return ctx.add_const(np.array(values, np.int64), hint)


def _axis(ctx: ImportContext, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}")
    return axis % rank


@tflite_op("RESHAPE", quant="same")
def reshape(ctx: ImportContext) -> None:
    """The shape comes from input 1 when there is one, else from the options' new_shape. A shape computed at run
    time from a dim unknown until then (SHAPE of a batch -1, STRIDED_SLICE, PACK) is the output's shape as the
    file records it when that has at most one unknown dim, which Reshape infers: the dims after it stay known
    (a convolution needs its channels). Else the shape stays a run-time input, and so do the dims after it."""
    if ctx.input(1) and ctx.const(ctx.input(1)) is None:
        recorded = ctx.recorded.get(ctx.outputs[0])
        shape = ctx.input(1) if recorded is None or list(recorded).count(-1) > 1 else _ints(ctx, list(recorded),
                                                                                              "shape")
    else:
        shape = _ints(ctx, ctx.int_list(ctx.input(1), "shape") if ctx.input(1) else
                      [int(d) for d in ctx.opt("NewShape", [])], "shape")
    ctx.emit("Reshape", [ctx.input(0), shape], ctx.outputs, allowzero=True)


@tflite_op("SQUEEZE", quant="same")
def squeeze(ctx: ImportContext) -> None:
    """No squeeze_dims squeezes every dim of size 1."""
    dims = [int(d) for d in ctx.opt("SqueezeDims", [])]
    ctx.emit("Squeeze", [ctx.input(0), *([_ints(ctx, dims, "axes")] if dims else [])], ctx.outputs)


@tflite_op("EXPAND_DIMS", quant="same")
def expand_dims(ctx: ImportContext) -> None:
    ctx.emit("Unsqueeze", [ctx.input(0), _ints(ctx, ctx.int_list(ctx.input(1), "axis"), "axes")], ctx.outputs)


@tflite_op("SLICE", quant="same")
def slice_(ctx: ImportContext) -> None:
    """begin and size per axis; size -1 runs to the end."""
    begin, size = ctx.int_list(ctx.input(1), "begin"), ctx.int_list(ctx.input(2), "size")
    end = [BIG if s == -1 else b + s for b, s in zip(begin, size)]
    ctx.emit("Slice", [ctx.input(0), _ints(ctx, begin, "starts"), _ints(ctx, end, "ends")], ctx.outputs)


@tflite_op("STRIDED_SLICE", quant="same")
def strided_slice(ctx: ImportContext) -> None:
    """TF's strided slice with its masks: an ellipsis stands for the dims no other entry names, new_axis entries
    insert a dim of size 1, shrink_axis entries take one element and drop the dim; `offset` makes end relative
    to begin. Becomes Slice, then Squeeze (shrunk dims) and Unsqueeze (new dims) where needed."""
    x = ctx.input(0)
    rank = ctx.value(x).rank
    begin, end, strides = (ctx.int_list(ctx.input(i), what) for i, what in ((1, "begin"), (2, "end"), (3, "strides")))
    bit = {name: int(ctx.opt(name, 0)) for name in ("BeginMask", "EndMask", "EllipsisMask", "NewAxisMask",
                                                    "ShrinkAxisMask")}

    def has(mask: str, i: int) -> bool:
        return bool(bit[mask] >> i & 1)

    spec = len(begin)
    consuming = sum(1 for i in range(spec) if not has("EllipsisMask", i) and not has("NewAxisMask", i))
    starts, ends, axes, steps, shrunk, layout = [], [], [], [], [], []
    dim = 0
    for i in range(spec):
        if has("EllipsisMask", i):
            layout += ["keep"] * (rank - consuming)
            dim += rank - consuming
            continue
        if has("NewAxisMask", i):
            layout.append("new")
            continue
        b, e, s = begin[i], end[i] + (begin[i] if ctx.opt("Offset", False) else 0), strides[i]
        if s == 0:
            raise ctx.error(f"stride 0 at entry {i}")
        if has("ShrinkAxisMask", i):
            e, s = (BIG if b == -1 else b + 1), 1
            shrunk.append(dim)
        else:
            b = (0 if s > 0 else BIG) if has("BeginMask", i) else b
            e = (BIG if s > 0 else -BIG) if has("EndMask", i) else e
            layout.append("keep")
        starts.append(b), ends.append(e), axes.append(dim), steps.append(s)
        dim += 1
    if dim > rank:
        raise ctx.error(f"{spec} slice entries for a rank-{rank} input")
    layout += ["keep"] * (rank - dim)
    new_axes = [i for i, kind in enumerate(layout) if kind == "new"]
    y = ctx.emit1("Slice", [x, _ints(ctx, starts, "starts"), _ints(ctx, ends, "ends"), _ints(ctx, axes, "axes"),
                            _ints(ctx, steps, "steps")], None if shrunk or new_axes else ctx.outputs[0])
    if shrunk:
        y = ctx.emit1("Squeeze", [y, _ints(ctx, shrunk, "axes")], None if new_axes else ctx.outputs[0])
    if new_axes:
        ctx.emit("Unsqueeze", [y, _ints(ctx, new_axes, "axes")], ctx.outputs)


@tflite_op("CONCATENATION", quant="int8")
def concatenation(ctx: ImportContext) -> None:
    ctx.emit_fused("Concat", ctx.inputs, axis=int(ctx.opt("Axis", 0)), fused=False)


@tflite_op("SPLIT", quant="same")
def split(ctx: ImportContext) -> None:
    """Inputs: axis, x; num_splits equal parts."""
    axis = ctx.int_list(ctx.input(0), "axis")[0]
    ctx.emit("Split", [ctx.input(1)], ctx.outputs, axis=axis)


@tflite_op("SPLIT_V", quant="same")
def split_v(ctx: ImportContext) -> None:
    """Inputs: x, size_splits (one may be -1: the rest), axis."""
    x = ctx.input(0)
    shape = ctx.value(x).shape
    axis = _axis(ctx, ctx.int_list(ctx.input(2), "axis")[0], len(shape))
    sizes = ctx.int_list(ctx.input(1), "size_splits")
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = shape[axis] - (sum(sizes) + 1)
    ctx.emit("Split", [x, _ints(ctx, sizes, "split")], ctx.outputs, axis=axis)


@tflite_op("PACK", quant="same")
def pack(ctx: ImportContext) -> None:
    rank = ctx.value(ctx.input(0)).rank + 1
    axis = _axis(ctx, int(ctx.opt("Axis", 0)), rank)
    parts = [ctx.emit1("Unsqueeze", [x, _ints(ctx, [axis], "axes")]) for x in ctx.inputs]
    ctx.emit("Concat", parts, ctx.outputs, axis=axis)


@tflite_op("UNPACK", quant="same")
def unpack(ctx: ImportContext) -> None:
    x = ctx.input(0)
    axis = _axis(ctx, int(ctx.opt("Axis", 0)), ctx.value(x).rank)
    parts = ctx.emit("Split", [x], len(ctx.outputs), axis=axis)
    for part, out in zip(parts, ctx.outputs):
        ctx.emit("Squeeze", [part, _ints(ctx, [axis], "axes")], [out])


@tflite_op("GATHER", quant="same")
def gather(ctx: ImportContext) -> None:
    """Without batch_dims our Gather; with b batch dims a GatherND over one coordinate per index after them,
    on params whose gather axis is moved next to the batch dims (and the result's dims moved back)."""
    x, indices = ctx.input(0), ctx.input(1)
    rank, index_rank = ctx.value(x).rank, ctx.value(indices).rank
    axis, b = _axis(ctx, int(ctx.opt("Axis", 0)), rank), int(ctx.opt("BatchDims", 0))
    b = b + index_rank if b < 0 else b
    if not b:
        ctx.emit("Gather", [x, indices], ctx.outputs, axis=axis)
        return
    if not b <= axis or b > index_rank:
        raise ctx.error(f"batch_dims {b} must be at most the axis {axis} and the indices' rank {index_rank}")
    moved = [*range(b), axis, *(d for d in range(b, rank) if d != axis)]
    if axis != b:
        x = ctx.emit1("Transpose", [x], ctx.like(x), perm=moved)
    coords = ctx.emit1("Unsqueeze", [indices, _ints(ctx, [-1], "axes")])
    if axis == b:
        ctx.emit("GatherND", [x, coords], ctx.outputs, batch_dims=b)
        return
    y = ctx.emit1("GatherND", [x, coords], ctx.like(x), batch_dims=b)
    between = index_rank - b              # gathered index dims, then params' dims b..axis-1, then the rest
    perm = [*range(b), *(b + between + j for j in range(axis - b)), *(b + j for j in range(between)),
            *range(b + between + axis - b, between + rank - 1)]
    ctx.emit("Transpose", [y], ctx.outputs, perm=perm)


@tflite_op("DYNAMIC_UPDATE_SLICE")
def dynamic_update_slice(ctx: ImportContext) -> None:
    """Inputs: operand, update, start_indices [rank] (run-time values allowed): the update written from the
    starts, each clamped so that the update fits (TFLite's rule) -> ScatterND with the update's index grid
    shifted by the clamped starts."""
    operand, update, starts = ctx.inputs[:3]
    dims, sizes = ctx.value(operand).shape, ctx.value(update).shape
    if len(dims) != len(sizes) or min((*dims, *sizes), default=0) < 0 or any(s > d for s, d in zip(sizes, dims)):
        raise ctx.error(f"an update of shape {list(sizes)} does not fit the operand's {list(dims)}")
    grid = np.stack(np.meshgrid(*(np.arange(s) for s in sizes), indexing="ij"), -1).astype(np.int64)
    begin = ctx.emit1("Cast", [starts], to=from_numpy(np.dtype(np.int64)))
    room = ctx.add_const(np.array([d - s for d, s in zip(dims, sizes)], np.int64), "room")
    begin = ctx.emit1("Maximum", [ctx.emit1("Minimum", [begin, room]), ctx.add_const(np.zeros((), np.int64), "zero")])
    index = ctx.emit1("Add", [ctx.add_const(grid, "grid"), begin])
    ctx.emit("ScatterND", [operand, index, update], ctx.outputs, reduction=fb.ScatterReduction.NONE)


@tflite_op("TRANSPOSE", quant="same")
def transpose(ctx: ImportContext) -> None:
    ctx.emit("Transpose", [ctx.input(0)], ctx.outputs, perm=ctx.int_list(ctx.input(1), "perm"))


def _pads(ctx: ImportContext) -> str:
    """TFLite's [rank, 2] paddings as our [begins..., ends...]."""
    paddings = np.asarray(ctx.require_const(ctx.input(1), "paddings"), np.int64).reshape(-1, 2)
    return _ints(ctx, [int(p) for p in paddings.T.ravel()], "pads")


@tflite_op("PAD", "PADV2", quant="same")
def pad(ctx: ImportContext) -> None:
    """Zero padding (PAD; the zero point for int8), or the constant input 2 (PADV2)."""
    value = [ctx.emit1("Reshape", [ctx.input(2), _ints(ctx, [], "scalar")])] if ctx.input(2) else []
    ctx.emit("Pad", [ctx.input(0), _pads(ctx), *value], ctx.outputs, mode=fb.PaddingFill.CONSTANT)


@tflite_op("MIRROR_PAD", quant="same")
def mirror_pad(ctx: ImportContext) -> None:
    """REFLECT (the edge not repeated) is our Pad; SYMMETRIC (the edge repeated) is spelled out below."""
    if int(ctx.opt("Mode", 0)) == 0:
        ctx.emit("Pad", [ctx.input(0), _pads(ctx)], ctx.outputs, mode=fb.PaddingFill.REFLECT)
    else:
        _symmetric_pad(ctx)


def _symmetric_pad(ctx: ImportContext) -> None:
    """Axis by axis: the first `before` entries reversed, x, the last `after` entries reversed, concatenated."""
    x = ctx.input(0)
    paddings = np.asarray(ctx.require_const(ctx.input(1), "paddings"), np.int64).reshape(-1, 2)
    padded = [(axis, int(b), int(a)) for axis, (b, a) in enumerate(paddings) if b or a]
    if not padded:
        ctx.emit("Identity", [x], ctx.outputs)
    for k, (axis, before, after) in enumerate(padded):
        size = ctx.value(x).shape[axis]
        if before > size or after > size:
            raise ctx.error(f"SYMMETRIC padding ({before}, {after}) exceeds the size {size} of axis {axis}")

        def mirrored(start: int, end: int) -> str:
            return ctx.emit1("Slice", [x, _ints(ctx, [start], "starts"), _ints(ctx, [end], "ends"),
                                       _ints(ctx, [axis], "axes"), _ints(ctx, [-1], "steps")])
        parts = ([mirrored(before - 1, -BIG)] if before else []) + [x] + ([mirrored(-1, -after - 1)] if after else [])
        x = ctx.emit1("Concat", parts, ctx.outputs[0] if k == len(padded) - 1 else None, axis=axis)


def _resize(ctx: ImportContext, mode: int, **attrs: int) -> None:
    """Inputs: x NHWC, size [new_h, new_w]; the batch and channel dims are kept."""
    x = ctx.input(0)
    size = ctx.int_list(ctx.input(1), "size")
    sizes = ctx.emit1("Concat", [ctx.emit1("Shape", [x], start=0, end=1), _ints(ctx, size, "size"),
                                 ctx.emit1("Shape", [x], start=3, end=4)], axis=0)
    ctx.emit("Resize", [x, "", "", sizes], ctx.outputs, mode=mode, **attrs)


@tflite_op("RESIZE_BILINEAR")
def resize_bilinear(ctx: ImportContext) -> None:
    C = fb.CoordinateTransform
    transform = (C.ALIGN_CORNERS if ctx.opt("AlignCorners", False) else
                 C.HALF_PIXEL if ctx.opt("HalfPixelCenters", False) else C.ASYMMETRIC)
    _resize(ctx, fb.ResizeMode.LINEAR, coordinate_transform=transform)


@tflite_op("RESIZE_NEAREST_NEIGHBOR", quant="same")
def resize_nearest_neighbor(ctx: ImportContext) -> None:
    """TFLite: round(x * (in - 1) / (out - 1)) with align_corners, else floor((x + 0.5 * half_pixel) * in / out)."""
    C, R = fb.CoordinateTransform, fb.NearestRounding
    if ctx.opt("AlignCorners", False):
        attrs = dict(coordinate_transform=C.ALIGN_CORNERS, nearest_rounding=R.ROUND_PREFER_CEIL)
    elif ctx.opt("HalfPixelCenters", False):
        attrs = dict(coordinate_transform=C.TF_HALF_PIXEL_FOR_NN, nearest_rounding=R.FLOOR)
    else:
        attrs = dict(coordinate_transform=C.ASYMMETRIC, nearest_rounding=R.FLOOR)
    _resize(ctx, fb.ResizeMode.NEAREST, **attrs)


@tflite_op("CAST")
def cast(ctx: ImportContext) -> None:
    ctx.emit("Cast", [ctx.input(0)], ctx.outputs, to=from_numpy(ctx.value(ctx.outputs[0]).dtype))


@tflite_op("BITCAST")
def bitcast(ctx: ImportContext) -> None:
    """Between types of one width (the shape is kept)."""
    ctx.emit("BitCast", [ctx.input(0)], ctx.outputs, to=from_numpy(ctx.value(ctx.outputs[0]).dtype))


@tflite_op("SHAPE")
def shape_of(ctx: ImportContext) -> None:
    dims = ctx.emit1("Shape", [ctx.input(0)])
    ctx.emit("Cast", [dims], ctx.outputs, to=from_numpy(ctx.value(ctx.outputs[0]).dtype))


@tflite_op("FILL")
def fill(ctx: ImportContext) -> None:
    """Inputs: dims, a scalar value."""
    value = ctx.emit1("Reshape", [ctx.input(1), _ints(ctx, [], "scalar")])
    ctx.emit("Expand", [value, _ints(ctx, ctx.int_list(ctx.input(0), "dims"), "shape")], ctx.outputs)


@tflite_op("ZEROS_LIKE")
def zeros_like(ctx: ImportContext) -> None:
    x = ctx.input(0)
    zero = ctx.add_const(np.zeros((), ctx.value(x).dtype), "zero")
    ctx.emit("Expand", [zero, ctx.emit1("Shape", [x])], ctx.outputs)


@tflite_op("RANGE")
def range_(ctx: ImportContext) -> None:
    ctx.emit("Range", ctx.inputs[:3], ctx.outputs)


@tflite_op("RANK")
def rank(ctx: ImportContext) -> None:
    out = ctx.value(ctx.outputs[0])
    out.const, out.shape = np.array(ctx.value(ctx.input(0)).rank, out.dtype), ()


@tflite_op("BROADCAST_ARGS")
def broadcast_args(ctx: ImportContext) -> None:
    """The broadcast of two constant (or statically known) shapes."""
    shapes = [ctx.int_list(ctx.input(i), "shape") for i in (0, 1)]
    try:
        shape = np.broadcast_shapes(tuple(shapes[0]), tuple(shapes[1]))
    except ValueError:
        raise ctx.error(f"shapes {shapes[0]} and {shapes[1]} do not broadcast") from None
    out = ctx.value(ctx.outputs[0])
    out.const = np.array(shape, out.dtype)
    out.shape = out.const.shape
