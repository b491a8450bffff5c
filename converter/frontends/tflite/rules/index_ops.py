"""TFLite importer rules for index and layout builtins: ARG_MAX, ARG_MIN -> ArgMinMax; TOPK_V2 -> TopK; TILE -> Tile; DEPTH_TO_SPACE, SPACE_TO_DEPTH -> ours (NCHW, ONNX's DCR
order, which is TF's on NHWC) between layout transposes. Index outputs are int64 in our ops and cast to the
TFLite output's type."""
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


@tflite_op("TOPK_V2")
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
