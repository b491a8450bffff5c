"""ONNX importer rules for the vision and detection ops: NonMaxSuppression."""
from __future__ import annotations

from converter.frontends.onnx.registry import ImportContext, onnx_op


@onnx_op("NonMaxSuppression")
def non_max_suppression(ctx: ImportContext) -> None:
    """Opsets 10 and 11 (the same op): the optional scalar inputs keep their positions."""
    ctx.emit("NonMaxSuppression", ctx.inputs, ctx.outputs, center_point_box=int(ctx.attr("center_point_box", 0)))
