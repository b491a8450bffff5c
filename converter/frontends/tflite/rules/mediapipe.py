"""TFLite importer rules for MediaPipe's custom operators that LiteRT runs (its XNNPACK delegate has them built
in): Convolution2DTransposeBias (the selfie segmentation models' upsampling head), MaxPoolingWithArgmax2D and
MaxUnpooling2D (segmentation decoders), all onto existing ops.

MediaPipe keeps these ops' options as raw C structs of int32 fields in the operator's custom options
(`TfLiteTransposeConvParams`: padding, stride_w, stride_h; `TfLitePoolParams`: padding, stride_w, stride_h,
filter_w, filter_h, ...), with TfLite's padding enum (1 SAME, 2 VALID), not the schema's.

The argmax of MaxPoolingWithArgmax2D is the position inside the window, column-major (dx * filter_h + dy), its
int32 bits stored
in a float32 tensor, as LiteRT's kernels write and MaxUnpooling2D reads it: our max pooling gives each maximum's
flat input index, turned into that and back by integer arithmetic against per-window base positions.
"""
from __future__ import annotations

import struct

import numpy as np

from converter.frontends.tflite.registry import SAME_UPPER, VALID as VALID_MODE, ImportContext, tflite_op
from converter.frontends.tflite.rules.nn import emit_transpose_conv
from lite.dtypes import DataType
from schema import fb

SAME, VALID = 1, 2                  # TfLitePadding
POOL_PARAMS = ("padding", "stride_w", "stride_h", "filter_w", "filter_h")
NHWC_TO_NCHW, NCHW_TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


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


def _window_starts(size: int, out: int, kernel: int, stride: int, same: bool) -> np.ndarray:
    """The input position of each output's first window tap along one axis, negative in the padding (TFLite's
    SAME pads the odd cell at the end)."""
    pad = max((out - 1) * stride + kernel - size, 0) // 2 if same else 0
    return np.arange(out, dtype=np.int64) * stride - pad


def _starts(p: dict[str, int], in_hw: tuple[int, int], out_hw: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    same = p["padding"] == SAME
    return (_window_starts(in_hw[0], out_hw[0], p["filter_h"], p["stride_h"], same),
            _window_starts(in_hw[1], out_hw[1], p["filter_w"], p["stride_w"], same))


def _flat_bases(rows: np.ndarray, cols: np.ndarray, width: int) -> np.ndarray:
    """[1, OH, OW, 1]: each window's first tap inside the input as a flat H * W index."""
    rows, cols = np.maximum(rows, 0), np.maximum(cols, 0)
    return (rows[:, None] * width + cols[None, :]).reshape(1, rows.size, cols.size, 1)


def _int(ctx: ImportContext, value: int) -> str:
    return ctx.add_const(np.array(value, np.int64), "int")


def _padded_tap(ctx: ImportContext, tap: str, pads: np.ndarray, shape: tuple[int, ...]) -> str:
    """The tap along one axis counted from the window's first tap, padding included, from `tap` counted from its
    first tap inside the input (`pads` cells before it). LiteRT reads a padding tap as the nearest edge cell and
    keeps the first of equal maxima: a maximum on the edge row next to the padding is tap 0."""
    pads = np.maximum(pads, 0)
    if not pads.any():
        return tap
    inside = ctx.emit1("Minimum", [tap, _int(ctx, 1)])               # 0 on the edge, 1 past it
    return ctx.emit1("Add", [tap, ctx.emit1("Mul", [inside, ctx.add_const(pads.reshape(shape), "pads")])])


@tflite_op("CUSTOM:MaxPoolingWithArgmax2D")
def max_pooling_with_argmax_2d(ctx: ImportContext) -> None:
    """Outputs: the maxima and, per maximum, its position in the window (dx * filter_h + dy) as int32 bits in a
    float32 tensor."""
    p = int_struct(ctx, POOL_PARAMS)
    x = ctx.input(0)
    _, h, w, _ = ctx.value(x).shape
    pooled, flat = ctx.emit("Pooling", [x], [ctx.outputs[0], ctx.graph.fresh(f"{ctx.name}:flat")],
                            mode=fb.PoolMode.MAX, kernel_h=p["filter_h"], kernel_w=p["filter_w"],
                            stride_h=p["stride_h"], stride_w=p["stride_w"],
                            pad_mode=SAME_UPPER if p["padding"] == SAME else VALID_MODE)
    _, oh, ow, _ = ctx.value(pooled).shape
    rows, cols = _starts(p, (h, w), (oh, ow))
    offset = ctx.emit1("Sub", [ctx.emit1("Mod", [flat, _int(ctx, h * w)]),
                               ctx.add_const(_flat_bases(rows, cols, w), "bases")])
    dy = ctx.emit1("Div", [offset, _int(ctx, w)])                     # offset = dy * W + dx
    dx = ctx.emit1("Sub", [offset, ctx.emit1("Mul", [dy, _int(ctx, w)])])
    dy, dx = _padded_tap(ctx, dy, -rows, (1, oh, 1, 1)), _padded_tap(ctx, dx, -cols, (1, 1, ow, 1))
    local = ctx.emit1("Add", [ctx.emit1("Mul", [dx, _int(ctx, p["filter_h"])]), dy])
    ctx.emit("BitCast", [ctx.emit1("Cast", [local], to=DataType.INT32)], ctx.outputs[1:2], to=DataType.FLOAT32)


@tflite_op("CUSTOM:MaxUnpooling2D")
def max_unpooling_2d(ctx: ImportContext) -> None:
    """Each value written at its window position (the argmax input's int32 bits), zeros elsewhere; the output
    is (input - 1) * stride + filter (VALID; LiteRT refuses SAME)."""
    p = int_struct(ctx, POOL_PARAMS)
    if p["padding"] != VALID:
        raise ctx.error("SAME padding is not supported (LiteRT refuses it too)")
    x, argmax = ctx.input(0), ctx.input(1)
    n, oh, ow, c = ctx.value(x).shape
    h, w = (oh - 1) * p["stride_h"] + p["filter_h"], (ow - 1) * p["stride_w"] + p["filter_w"]
    local = ctx.emit1("Cast", [ctx.emit1("BitCast", [argmax], to=DataType.INT32)], to=DataType.INT64)
    dx = ctx.emit1("Div", [local, _int(ctx, p["filter_h"])])          # local = dx * filter_h + dy
    dy = ctx.emit1("Sub", [local, ctx.emit1("Mul", [dx, _int(ctx, p["filter_h"])])])
    offset = ctx.emit1("Add", [ctx.emit1("Mul", [dy, _int(ctx, w)]), dx])
    planes = (np.arange(n, dtype=np.int64).reshape(n, 1, 1, 1) * c + np.arange(c).reshape(1, 1, 1, c)) * h * w
    flat = ctx.emit1("Add", [offset, ctx.add_const(_flat_bases(*_starts(p, (h, w), (oh, ow)), w) + planes,
                                                   "bases")])
    unpooled = ctx.emit1("MaxUnpool", [ctx.emit1("Transpose", [x], perm=NHWC_TO_NCHW),
                                       ctx.emit1("Transpose", [flat], perm=NHWC_TO_NCHW),
                                       ctx.add_const(np.array([n, c, h, w], np.int64), "shape")],
                         kernel=[p["filter_h"], p["filter_w"]], strides=[p["stride_h"], p["stride_w"]],
                         pads=[0, 0, 0, 0])
    ctx.emit("Transpose", [unpooled], ctx.outputs, perm=NCHW_TO_NHWC)
