"""TFLite importer rules for MediaPipe's custom operators that LiteRT runs (its XNNPACK delegate has them built
in): Convolution2DTransposeBias (the selfie segmentation models' upsampling head).

MediaPipe keeps these ops' options as raw C structs of int32 fields in the operator's custom options
(`TfLiteTransposeConvParams`: padding, stride_w, stride_h), with TfLite's padding enum (1 SAME, 2 VALID), not the
schema's.
"""
from __future__ import annotations

import struct

from converter.frontends.tflite.registry import ImportContext, tflite_op
from converter.frontends.tflite.rules.nn import emit_transpose_conv

SAME, VALID = 1, 2                  # TfLitePadding


def int_struct(ctx: ImportContext, fields: tuple[str, ...]) -> dict[str, int]:
    """The first `len(fields)` int32 fields of the custom options, by name."""
    raw = ctx.op.custom_options
    if len(raw) < 4 * len(fields):
        raise ctx.error(f"custom options hold {len(raw)} bytes, {4 * len(fields)} expected ({', '.join(fields)})")
    values = dict(zip(fields, struct.unpack_from(f"<{len(fields)}i", raw)))
    if values.get("padding", SAME) not in (SAME, VALID):
        raise ctx.error(f"padding {values['padding']} is neither SAME (1) nor VALID (2)")
    if any(values[f] < 1 for f in fields if f.startswith(("stride", "filter"))):
        raise ctx.error(f"strides and filter sizes must be positive, got {values}")
    return values


@tflite_op("CUSTOM:Convolution2DTransposeBias")
def convolution_2d_transpose_bias(ctx: ImportContext) -> None:
    """TRANSPOSE_CONV with the bias as input 2 and no output_shape input: the output is the input times the
    stride (SAME) or (input - 1) * stride + filter (VALID), as MediaPipe computes it."""
    p = int_struct(ctx, ("padding", "stride_w", "stride_h"))
    x, w = ctx.input(0), ctx.input(1)
    _, kh, kw, _ = ctx.value(w).shape
    _, h, wd, _ = ctx.value(x).shape
    same = p["padding"] == SAME
    out_hw = (h * p["stride_h"], wd * p["stride_w"]) if same else \
        ((h - 1) * p["stride_h"] + kh, (wd - 1) * p["stride_w"] + kw)
    emit_transpose_conv(ctx, x, w, [ctx.input(2)] if ctx.input(2) else [], out_hw, (p["stride_h"], p["stride_w"]),
                        same)
