"""TFLite importer rules for the neural-network builtins: CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV,
FULLY_CONNECTED, BATCH_MATMUL, pooling, SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION.

TFLite's activations are NHWC like ours and its CONV_2D weights are OHWI like ours, so convolutions map
directly; DEPTHWISE_CONV_2D weights [1, KH, KW, C * M] become a grouped OHWI [C * M, KH, KW, 1], TRANSPOSE_CONV's
OHWI weights our IHWO. int8 convolutions and FC keep TFLite's per-channel weights (axis 0 after the relayout)
and int32 biases.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from converter.frontends.tflite.registry import VALID, ImportContext, tflite_op
from schema import fb

OHWI_TO_IHWO = (3, 1, 2, 0)      # also depthwise [1, KH, KW, C*M] -> [C*M, KH, KW, 1]


def relayout(ctx: ImportContext, w: str, perm: tuple[int, ...]) -> str:
    """A weight permuted by `perm`: constants (with their quantization axis) at once, others by a Transpose."""
    value = ctx.value(w)
    if value.const is None:
        return ctx.emit1("Transpose", [w], perm=list(perm))
    name = ctx.add_const(value.const.transpose(perm), "weight")
    moved = ctx.value(name)
    moved.quant_params, moved.quant_axis = list(value.quant_params), perm.index(value.quant_axis)
    return name


def window(ctx: ImportContext, kernel: tuple[int, int], dilated: bool = True) -> dict[str, Any]:
    attrs = dict(kernel_h=kernel[0], kernel_w=kernel[1], stride_h=int(ctx.opt("StrideH", 1)),
                 stride_w=int(ctx.opt("StrideW", 1)), pad_mode=ctx.padding())
    if dilated:
        attrs.update(dilation_h=int(ctx.opt("DilationHFactor", 1)), dilation_w=int(ctx.opt("DilationWFactor", 1)))
    return attrs


def _bias(ctx: ImportContext, index: int) -> list[str]:
    return [ctx.input(index)] if ctx.input(index) else []


@tflite_op("CONV_2D", "DEPTHWISE_CONV_2D", quant="int8")
def conv_2d(ctx: ImportContext) -> None:
    """CONV_2D (grouped when the input has a multiple of the filter's channels) and DEPTHWISE_CONV_2D (group =
    input channels, M = depth_multiplier outputs per group)."""
    x, w = ctx.input(0), ctx.input(1)
    in_c = ctx.value(x).shape[3]
    if ctx.op.op == "CONV_2D":
        out_c, kh, kw, per_group = ctx.value(w).shape
    else:
        (_, kh, kw, out_c), per_group = ctx.value(w).shape, 1
        w = relayout(ctx, w, OHWI_TO_IHWO)
    if per_group <= 0 or in_c % per_group or in_c // per_group == 0 or out_c % (in_c // per_group):
        raise ctx.error(f"{in_c} input channels do not fit a filter of {out_c} outputs x {per_group} inputs")
    ctx.emit_fused("Conv2D", [x, w, *_bias(ctx, 2)], group=in_c // per_group, in_channel=in_c, out_channel=out_c,
                   **window(ctx, (kh, kw)))


def _transpose_pads(size: int, out: int, kernel: int, stride: int, same: bool) -> tuple[int, int, int]:
    """(pad before, pad after, output padding) of one axis, padding computed as TFLite does: as for a
    convolution from the output size back to the input."""
    total = 0
    if same:
        conv_out = (out + stride - 1) // stride
        total = max((conv_out - 1) * stride + kernel - out, 0)
    before = total // 2
    after = (size - 1) * stride + kernel - out - before
    return before, max(after, 0), max(-after, 0)


def emit_transpose_conv(ctx: ImportContext, x: str, w: str, bias: list[str], out_hw: tuple[int, int],
                        strides: tuple[int, int], same: bool) -> None:
    """Conv2DTranspose of NHWC `x` by OHWI weights `w` (+ bias) into an output of spatial size `out_hw`."""
    out_c, kh, kw, in_c = ctx.value(w).shape
    _, h, wd, _ = ctx.value(x).shape
    (sh, sw), (out_h, out_w) = strides, out_hw
    top, bottom, pad_h = _transpose_pads(h, out_h, kh, sh, same)
    left, right, pad_w = _transpose_pads(wd, out_w, kw, sw, same)
    ctx.emit_fused("Conv2DTranspose", [x, relayout(ctx, w, OHWI_TO_IHWO), *bias], kernel_h=kh, kernel_w=kw,
                   stride_h=sh, stride_w=sw, pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right,
                   output_pad_h=pad_h, output_pad_w=pad_w, in_channel=in_c, out_channel=out_c)


@tflite_op("TRANSPOSE_CONV")
def transpose_conv(ctx: ImportContext) -> None:
    """Inputs: output_shape, weights OHWI, input, bias?."""
    shape = ctx.int_list(ctx.input(0), "output_shape")
    emit_transpose_conv(ctx, ctx.input(2), ctx.input(1), _bias(ctx, 3), (shape[1], shape[2]),
                        (int(ctx.opt("StrideH", 1)), int(ctx.opt("StrideW", 1))), ctx.padding() != VALID)


@tflite_op("FULLY_CONNECTED", quant="int8")
def fully_connected(ctx: ImportContext) -> None:
    """y = x @ W^T + b over the last axis; without keep_num_dims the input is first flattened to [-1, in]."""
    x, w = ctx.input(0), ctx.input(1)
    if int(ctx.opt("WeightsFormat", 0)) != 0:
        raise ctx.error("shuffled weights are not supported")
    units, depth = ctx.value(w).shape
    if ctx.value(x).rank != 2 and not ctx.opt("KeepNumDims", False):
        x = ctx.emit1("Reshape", [x, ctx.add_const(np.array([-1, depth], np.int64), "shape")], ctx.like(x))
    if ctx.value(w).const is None and _bias(ctx, 2):
        ctx.emit_fused("Add", [ctx.emit1("MatMul", [x, w], transpose_b=True), ctx.input(2)])
    elif ctx.value(w).const is None:
        ctx.emit_fused("MatMul", [x, w], transpose_b=True)
    else:
        ctx.emit_fused("FullConnection", [x, w, *_bias(ctx, 2)])


@tflite_op("BATCH_MATMUL")
def batch_matmul(ctx: ImportContext) -> None:
    ctx.emit("MatMul", [ctx.input(0), ctx.input(1)], ctx.outputs, transpose_a=bool(ctx.opt("AdjX", False)),
             transpose_b=bool(ctx.opt("AdjY", False)))


def _pool_window(ctx: ImportContext) -> dict[str, Any]:
    return window(ctx, (int(ctx.opt("FilterHeight", 1)), int(ctx.opt("FilterWidth", 1))), dilated=False)


@tflite_op("AVERAGE_POOL_2D", "MAX_POOL_2D", quant="int8")
def pool_2d(ctx: ImportContext) -> None:
    """Average pooling over the valid cells only (TFLite never counts padding)."""
    mode = fb.PoolMode.AVG if ctx.op.op == "AVERAGE_POOL_2D" else fb.PoolMode.MAX
    ctx.emit_fused("Pooling", [ctx.input(0)], mode=mode, count_include_pad=False, **_pool_window(ctx))


@tflite_op("L2_POOL_2D")
def l2_pool_2d(ctx: ImportContext) -> None:
    """sqrt(mean of squares) over each window, the fused activation after the root."""
    x = ctx.input(0)
    mean = ctx.emit1("Pooling", [ctx.emit1("Mul", [x, x])], mode=fb.PoolMode.AVG, count_include_pad=False,
                     **_pool_window(ctx))
    ctx.emit_fused("Sqrt", [mean], fused=False)


@tflite_op("SOFTMAX")
def softmax(ctx: ImportContext) -> None:
    """softmax(beta * x) over the last axis."""
    x, beta = ctx.input(0), float(ctx.opt("Beta", 1.0))
    if beta != 1.0:
        x = ctx.emit1("Mul", [x, ctx.add_const(np.array(beta, np.float32), "beta")])
    ctx.emit("Softmax", [x], ctx.outputs, axis=-1)


@tflite_op("LOG_SOFTMAX")
def log_softmax(ctx: ImportContext) -> None:
    ctx.emit("LogSoftmax", [ctx.input(0)], ctx.outputs, axis=-1)


@tflite_op("L2_NORMALIZATION")
def l2_normalization(ctx: ImportContext) -> None:
    """x / max(sqrt(sum(x^2, last axis)), 1e-6), TFLite's epsilon."""
    x = ctx.input(0)
    squares = ctx.emit1("Mul", [x, x])
    total = ctx.emit1("Reduce", [squares, ctx.add_const(np.array([-1], np.int64), "axes")],
                      mode=fb.ReduceMode.SUM, keep_dims=True)
    norm = ctx.emit1("Maximum", [ctx.emit1("Sqrt", [total]), ctx.add_const(np.array(1e-6, np.float32), "eps")])
    ctx.emit_fused("Div", [x, norm])


@tflite_op("LOCAL_RESPONSE_NORMALIZATION")
def local_response_normalization(ctx: ImportContext) -> None:
    """TF's x / (bias + alpha * sum of squares over 2r + 1 channels)^beta is our (ONNX) LRN with
    alpha * size in place of alpha."""
    size = 2 * int(ctx.opt("Radius", 5)) + 1
    ctx.emit("LRN", [ctx.input(0)], ctx.outputs, size=size, alpha=float(ctx.opt("Alpha", 1.0)) * size,
             beta=float(ctx.opt("Beta", 0.5)), bias=float(ctx.opt("Bias", 1.0)))
