"""ONNX importer rules for the vision and detection ops: NonMaxSuppression, GridSample, AffineGrid, RoiAlign,
MaxRoiPool, MaxUnpool."""
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


@onnx_op("RoiAlign")
def roi_align(ctx: ImportContext) -> None:
    """Opset 10 samples at output_half_pixel coordinates; opset 16 adds coordinate_transformation_mode
    (default half_pixel)."""
    mode = ctx.attr("mode", "avg")
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel" if ctx.opset >= 16 else "output_half_pixel")
    if mode not in ("avg", "max") or transform not in ("half_pixel", "output_half_pixel"):
        raise ctx.error(f"mode '{mode}' / coordinate_transformation_mode '{transform}' is not supported",
                        InvalidOpAttrError)
    ctx.nhwc_op("RoiAlign", ctx.input(0), ctx.inputs[1:3], ctx.outputs[0],
                mode=fb.PoolMode.AVG if mode == "avg" else fb.PoolMode.MAX,
                output_height=int(ctx.attr("output_height", 1)), output_width=int(ctx.attr("output_width", 1)),
                sampling_ratio=int(ctx.attr("sampling_ratio", 0)), spatial_scale=float(ctx.attr("spatial_scale", 1.0)),
                half_pixel=transform == "half_pixel")


@onnx_op("MaxRoiPool")
def max_roi_pool(ctx: ImportContext) -> None:
    pooled = ctx.attr("pooled_shape")
    if pooled is None or len(pooled) != 2:
        raise ctx.error("attribute 'pooled_shape' (2 values) is required", InvalidOpAttrError)
    ctx.nhwc_op("MaxRoiPool", ctx.input(0), [ctx.input(1)], ctx.outputs[0], pooled_h=int(pooled[0]),
                pooled_w=int(pooled[1]), spatial_scale=float(ctx.attr("spatial_scale", 1.0)))


@onnx_op("MaxUnpool")
def max_unpool(ctx: ImportContext) -> None:
    """Opsets 9 and 11 (the same op); the indices refer to the source (NCHW) layout, so no transposes."""
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise ctx.error("attribute 'kernel_shape' is required", InvalidOpAttrError)
    ctx.emit("MaxUnpool", ctx.inputs[:3], ctx.outputs, kernel=[int(k) for k in kernel],
             strides=[int(s) for s in ctx.attr("strides", [])], pads=[int(p) for p in ctx.attr("pads", [])])
