"""ONNX importer rules for the vision and detection ops: NonMaxSuppression, GridSample, AffineGrid."""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite.status import InvalidOpAttrError
from schema import fb


@onnx_op("NonMaxSuppression")
def non_max_suppression(ctx: ImportContext) -> None:
    """Opsets 10 and 11 (the same op): the optional scalar inputs keep their positions."""
    ctx.emit("NonMaxSuppression", ctx.inputs, ctx.outputs, center_point_box=int(ctx.attr("center_point_box", 0)))


_GRID_MODES = {"bilinear": fb.ResizeMode.LINEAR, "linear": fb.ResizeMode.LINEAR, "nearest": fb.ResizeMode.NEAREST,
               "bicubic": fb.ResizeMode.CUBIC, "cubic": fb.ResizeMode.CUBIC}
_GRID_PADDINGS = {"zeros": fb.PaddingFill.CONSTANT, "border": fb.PaddingFill.EDGE,
                  "reflection": fb.PaddingFill.REFLECT}


def channels_last(rank: int) -> list[int]:
    return [0, *range(2, rank), 1]


def channels_first(rank: int) -> list[int]:
    return [0, rank - 1, *range(1, rank - 1)]


@onnx_op("GridSample")
def grid_sample(ctx: ImportContext) -> None:
    """Opset 16 (bilinear / nearest / bicubic, 2-D) and 20 (linear / nearest / cubic, 2-D and 3-D); runs on the
    channels-last view of x, so each sample gathers contiguous channel rows."""
    mode, padding = ctx.attr("mode", "linear" if ctx.opset >= 20 else "bilinear"), ctx.attr("padding_mode", "zeros")
    if mode not in _GRID_MODES or padding not in _GRID_PADDINGS:
        raise ctx.error(f"mode '{mode}' / padding_mode '{padding}' is not one of {sorted(_GRID_MODES)} / "
                        f"{sorted(_GRID_PADDINGS)}", InvalidOpAttrError)
    x = ctx.input(0)
    rank = ctx.value(x).rank
    if rank not in (4, 5):
        raise ctx.error(f"input '{x}' has rank {rank}: GridSample samples 2-D or 3-D images")
    y = ctx.emit1("GridSample", [ctx.emit1("Transpose", [x], perm=channels_last(rank)), ctx.input(1)],
                  mode=_GRID_MODES[mode], padding_mode=_GRID_PADDINGS[padding],
                  align_corners=bool(ctx.attr("align_corners", 0)))
    ctx.emit("Transpose", [y], ctx.outputs[:1], perm=channels_first(rank))


@onnx_op("AffineGrid")
def affine_grid(ctx: ImportContext) -> None:
    ctx.emit("AffineGrid", ctx.inputs[:2], ctx.outputs, align_corners=bool(ctx.attr("align_corners", 0)))
