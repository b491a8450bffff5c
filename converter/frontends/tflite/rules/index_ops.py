"""TFLite importer rules for index and layout builtins: ARG_MAX, ARG_MIN -> ArgMinMax; TOPK_V2 -> TopK; TILE ->
Tile; BROADCAST_TO -> Expand; DEPTH_TO_SPACE, SPACE_TO_DEPTH -> ours (NCHW, ONNX's DCR order, which is TF's on
NHWC) between layout transposes; SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND -> Pad / Reshape / Transpose / Slice;
REVERSE_V2 -> Slice with step -1; REVERSE_SEQUENCE, GATHER_ND, ONE_HOT, UNIQUE -> ours; EMBEDDING_LOOKUP ->
Gather; WHERE -> NonZero + Transpose. Index outputs are int64 in our ops and cast to the TFLite output's type.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from lite.dtypes import from_numpy
from schema import fb

NHWC_TO_NCHW, NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _int64(ctx: ImportContext, values: list[int], hint: str) -> str:
    return ctx.add_const(np.array(values, np.int64), hint)


def _typed(ctx: ImportContext, op: str, inputs: list[str], index_outputs: list[int], **attrs) -> None:
    """Emit `op`; outputs listed in `index_outputs` (int64 in our op) are cast to the TFLite output's type."""
    produced = [o if k not in index_outputs or ctx.value(o).dtype == np.int64 else ctx.graph.fresh(f"{o}:int64")
                for k, o in enumerate(ctx.outputs)]
    ctx.emit(op, inputs, produced, **attrs)
    for o, p in zip(ctx.outputs, produced):
        if o != p:
            ctx.emit("Cast", [p], [o], to=from_numpy(ctx.value(o).dtype))


@tflite_op("ARG_MAX", "ARG_MIN")
def arg_min_max(ctx: ImportContext) -> None:
    axis = ctx.int_list(ctx.input(1), "axis")[0]
    _typed(ctx, "ArgMinMax", [ctx.input(0)], [0], mode=fb.ArgMode.MAX if ctx.op.op == "ARG_MAX" else fb.ArgMode.MIN,
           axis=axis, keep_dims=False)


@tflite_op("TOPK_V2", quant="same")
def top_k(ctx: ImportContext) -> None:
    k = ctx.int_list(ctx.input(1), "k")
    _typed(ctx, "TopK", [ctx.input(0), _int64(ctx, k, "k")], [1], axis=-1, largest=True, sorted=True)


@tflite_op("TILE", quant="same")
def tile(ctx: ImportContext) -> None:
    ctx.emit("Tile", [ctx.input(0), _int64(ctx, ctx.int_list(ctx.input(1), "multiples"), "repeats")], ctx.outputs)


@tflite_op("DEPTH_TO_SPACE", "SPACE_TO_DEPTH", quant="same")
def depth_space(ctx: ImportContext) -> None:
    op = "DepthToSpace" if ctx.op.op == "DEPTH_TO_SPACE" else "SpaceToDepth"
    nchw = ctx.emit1("Transpose", [ctx.input(0)], perm=NHWC_TO_NCHW)
    moved = ctx.emit1(op, [nchw], block_size=int(ctx.opt("BlockSize", 2)), mode=fb.DepthToSpaceMode.DCR)
    ctx.emit("Transpose", [moved], ctx.outputs, perm=NCHW_TO_NHWC)


@tflite_op("BROADCAST_TO", quant="same")
def broadcast_to(ctx: ImportContext) -> None:
    ctx.emit("Expand", [ctx.input(0), _int64(ctx, ctx.int_list(ctx.input(1), "shape"), "shape")], ctx.outputs)


def _blocks(ctx: ImportContext, x: str) -> tuple[list[int], np.ndarray, list[int]]:
    """(block_shape, [M, 2] paddings or crops, x's shape) with M spatial dims after the batch dim."""
    block = ctx.int_list(ctx.input(1), "block_shape")
    pads = np.asarray(ctx.require_const(ctx.input(2), "paddings / crops"), np.int64).reshape(-1, 2)
    shape = list(ctx.value(x).shape)
    if len(block) != len(pads) or len(shape) < len(block) + 1 or min(block, default=1) < 1:
        raise ctx.error(f"block_shape {block} and {len(pads)} paddings do not fit an input of shape {shape}")
    return block, pads, shape


@tflite_op("SPACE_TO_BATCH_ND", quant="same")
def space_to_batch_nd(ctx: ImportContext) -> None:
    """Pad the M spatial dims, split each into (size / block, block), move the block factors in front of the
    batch: [N, H, W, C] -> [bh * bw * N, Hp / bh, Wp / bw, C]."""
    x = ctx.input(0)
    block, pads, shape = _blocks(ctx, x)
    m, rest = len(block), shape[len(block) + 1:]
    padded = ctx.emit1("Pad", [x, _int64(ctx, [0, *pads[:, 0], *[0] * len(rest), 0, *pads[:, 1], *[0] * len(rest)],
                                         "pads")], mode=fb.PaddingFill.CONSTANT)
    sizes = [s + int(p.sum()) for s, p in zip(shape[1:m + 1], pads)]
    if any(s % b for s, b in zip(sizes, block)):
        raise ctx.error(f"padded spatial dims {sizes} are not multiples of block_shape {block}")
    split = [-1] + [v for s, b in zip(sizes, block) for v in (s // b, b)] + rest
    grid = ctx.emit1("Reshape", [padded, _int64(ctx, split, "shape")])
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + list(range(2 * m + 1, len(split)))
    moved = ctx.emit1("Transpose", [grid], perm=perm)
    ctx.emit("Reshape", [moved, _int64(ctx, [-1] + [s // b for s, b in zip(sizes, block)] + rest, "shape")],
             ctx.outputs)


@tflite_op("BATCH_TO_SPACE_ND", quant="same")
def batch_to_space_nd(ctx: ImportContext) -> None:
    """The inverse of SPACE_TO_BATCH_ND: [bh * bw * N, H, W, C] -> [N, H * bh, W * bw, C], then the crops."""
    x = ctx.input(0)
    block, crops, shape = _blocks(ctx, x)
    m, rest = len(block), shape[len(block) + 1:]
    grid = ctx.emit1("Reshape", [x, _int64(ctx, [*block, -1, *shape[1:]], "shape")])
    perm = [m] + [v for i in range(m) for v in (m + 1 + i, i)] + list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    moved = ctx.emit1("Transpose", [grid], perm=perm)
    sizes = [s * b for s, b in zip(shape[1:m + 1], block)]
    joined = ctx.emit1("Reshape", [moved, _int64(ctx, [-1, *sizes, *rest], "shape")])
    axes = list(range(1, m + 1))
    ends = [s - int(c) for s, c in zip(sizes, crops[:, 1])]
    ctx.emit("Slice", [joined, _int64(ctx, list(crops[:, 0]), "starts"), _int64(ctx, ends, "ends"),
                       _int64(ctx, axes, "axes")], ctx.outputs)


@tflite_op("REVERSE_V2", quant="same")
def reverse_v2(ctx: ImportContext) -> None:
    """A step -1 slice over each listed axis."""
    axes = ctx.int_list(ctx.input(1), "axis")
    big = (1 << 63) - 1
    ctx.emit("Slice", [ctx.input(0), _int64(ctx, [-1] * len(axes), "starts"), _int64(ctx, [-big] * len(axes), "ends"),
                       _int64(ctx, axes, "axes"), _int64(ctx, [-1] * len(axes), "steps")], ctx.outputs)


@tflite_op("REVERSE_SEQUENCE", quant="same")
def reverse_sequence(ctx: ImportContext) -> None:
    lengths = ctx.emit1("Cast", [ctx.input(1)], to=from_numpy(np.dtype(np.int64)))
    ctx.emit("ReverseSequence", [ctx.input(0), lengths], ctx.outputs, batch_axis=int(ctx.opt("BatchDim", 0)),
             time_axis=int(ctx.opt("SeqDim", 0)))


@tflite_op("GATHER_ND", quant="same")
def gather_nd(ctx: ImportContext) -> None:
    ctx.emit("GatherND", ctx.inputs[:2], ctx.outputs, batch_dims=0)


@tflite_op("EMBEDDING_LOOKUP")
def embedding_lookup(ctx: ImportContext) -> None:
    """Inputs: ids, table; rows of the table (hybrid models store it int8, dequantized here)."""
    ctx.emit("Gather", [ctx.input(1), ctx.input(0)], ctx.outputs, axis=0)


@tflite_op("ONE_HOT")
def one_hot(ctx: ImportContext) -> None:
    """Inputs: indices, depth, on_value, off_value -> our OneHot's values [off, on]. A negative index is all
    off in TFLite (ONNX counts it from the end), so it becomes one past any depth."""
    indices, flat = ctx.input(0), _int64(ctx, [1], "shape")
    dtype = ctx.value(indices).dtype
    negative = ctx.emit1("Compare", [indices, ctx.add_const(np.zeros((), dtype), "zero")], mode=fb.CompareMode.LESS)
    indices = ctx.emit1("Where", [negative, ctx.add_const(np.array(np.iinfo(dtype).max, dtype), "off"), indices])
    values = ctx.emit1("Concat", [ctx.emit1("Reshape", [ctx.input(k), flat]) for k in (3, 2)], axis=0)
    ctx.emit("OneHot", [indices, ctx.input(1), values], ctx.outputs, axis=int(ctx.opt("Axis", -1)))


@tflite_op("WHERE")
def where(ctx: ImportContext) -> None:
    """The coordinates [count, rank] of the true (non-zero) entries, in row-major order."""
    coords = ctx.emit1("NonZero", [ctx.input(0)], ctx.typed("coords", np.int64, 2))
    _typed(ctx, "Transpose", [coords], [0], perm=[1, 0])


@tflite_op("UNIQUE")
def unique(ctx: ImportContext) -> None:
    """1-D x -> its distinct values in order of first appearance, and each element's index into them."""
    int64 = [ctx.typed(hint, np.int64, 1) for hint in ("indices", "inverse", "counts")]
    _, _, inverse, _ = ctx.emit("Unique", [ctx.input(0)], [ctx.outputs[0], *int64], sorted=False)
    ctx.emit("Cast", [inverse], ctx.outputs[1:2], to=from_numpy(ctx.value(ctx.outputs[1]).dtype))



@tflite_op("NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5")
def non_max_suppression(ctx: ImportContext) -> None:
    """Inputs: boxes [N, 4] (corners), scores [N], max_output_size, iou_threshold, score_threshold, and for V5
    soft_nms_sigma (only 0: hard NMS). Outputs: selected_indices [max_output_size] padded with 0, V5's
    selected_scores likewise, valid_outputs. Our NonMaxSuppression (ONNX's, one batch and class here) selects
    the same boxes in the same order; the padding is a Concat with zeros cut to max_output_size."""
    boxes, scores, size, iou, threshold = ctx.inputs[:5]
    if ctx.op.op.endswith("V5") and any(ctx.require_const(ctx.input(5), "soft_nms_sigma").ravel()):
        raise ctx.error("soft NMS (soft_nms_sigma > 0) is not supported")
    limit = ctx.int_list(size, "max_output_size")[0]
    batched = ctx.emit1("Unsqueeze", [boxes, _int64(ctx, [0], "axes")])
    classes = ctx.emit1("Reshape", [scores, _int64(ctx, [1, 1, -1], "shape")])
    selected = ctx.emit1("NonMaxSuppression", [batched, classes, _int64(ctx, [limit], "limit"), iou, threshold],
                         ctx.typed("selected", np.int64, 2))
    index = ctx.emit1("Gather", [selected, ctx.add_const(np.array(2, np.int64), "column")], axis=1)

    def padded(values: str, out: str) -> None:
        zeros = ctx.add_const(np.zeros(limit, ctx.value(values).dtype), "zeros")
        full = ctx.emit1("Slice", [ctx.emit1("Concat", [values, zeros], axis=0), _int64(ctx, [0], "starts"),
                                   _int64(ctx, [limit], "ends")])
        ctx.emit("Cast", [full], [out], to=from_numpy(ctx.value(out).dtype))
    padded(index, ctx.outputs[0])
    if len(ctx.outputs) == 3:
        padded(ctx.emit1("Gather", [scores, index], axis=0), ctx.outputs[1])
    count = ctx.emit1("Reshape", [ctx.emit1("Shape", [index]), _int64(ctx, [], "scalar")])
    ctx.emit("Cast", [count], ctx.outputs[-1:], to=from_numpy(ctx.value(ctx.outputs[-1]).dtype))
