"""3-D (rank-5, NCDHW) Conv, ConvTranspose and pooling, built from the 2-D NHWC ops so that they run on the
same kernels (Conv2D's im2col/GEMM, Winograd and depthwise paths; Conv2DTranspose's GEMM + col2im; Pooling):

- Conv: the depth windows are unfolded into channels by one Gather ([N, C, OD, KD, H, W] -> [N*OD, C*KD, H, W]),
  the weight [O, C/G, KD, KH, KW] becomes [O, C/G*KD, KH, KW], and one Conv2D over H, W does the rest.
- ConvTranspose: one Conv2DTranspose over H, W makes every (input depth, depth tap) contribution as channels
  [N*D, O*KD, OH, OW]; the depth col2im (z = i * stride + k * dilation - pad) is a FullConnection with a constant
  0/1 matrix [OD, D*KD] over the last axis.
- Pooling: max, mean and Lp norms over a D x H x W box are separable (each axis' pads and counts are
  independent), so pool H, W on [N, C*D, H, W], then D on [N, C, D, OH*OW].
The reshapes need static channel and spatial dims; the batch may vary.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from converter.frontends.onnx.registry import ImportContext
from lite.kernels._conv_math import make_window
from lite.kernels.conv2d_transpose import transposed_axis
from schema import fb

_PAD_MODES = {"NOTSET": fb.PadMode.PAD, "SAME_UPPER": fb.PadMode.SAME_UPPER,
              "SAME_LOWER": fb.PadMode.SAME_LOWER, "VALID": fb.PadMode.VALID}


@dataclass(frozen=True)
class Axes:
    """Per-axis (D, H, W) window attributes of a 3-D node."""
    kernel: list[int]
    stride: list[int]
    dilation: list[int]
    begin: list[int]
    end: list[int]
    pad_mode: int

    def hw(self) -> dict[str, Any]:
        """The H and W part as Conv2D / Pooling attributes."""
        return dict(kernel_h=self.kernel[1], kernel_w=self.kernel[2], stride_h=self.stride[1],
                    stride_w=self.stride[2], dilation_h=self.dilation[1], dilation_w=self.dilation[2],
                    pad_top=self.begin[1], pad_bottom=self.end[1], pad_left=self.begin[2], pad_right=self.end[2],
                    pad_mode=self.pad_mode)


def _axes(ctx: ImportContext, kernel: list[int]) -> Axes:
    values = {name: [int(v) for v in ctx.attr(name, [default] * count)] for name, default, count in
              (("strides", 1, 3), ("dilations", 1, 3), ("pads", 0, 6))}
    if [len(kernel), *map(len, values.values())] != [3, 3, 3, 6]:
        raise ctx.error("3-D ops need 3 kernel dims, strides and dilations, and 6 pads")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in _PAD_MODES:
        raise ctx.error(f"auto_pad '{auto_pad}' is not one of {sorted(_PAD_MODES)}")
    pads = values["pads"]
    return Axes(kernel, values["strides"], values["dilations"], pads[:3], pads[3:], _PAD_MODES[auto_pad])


def _static_dims(ctx: ImportContext, x: str) -> tuple[int, ...]:
    dims = ctx.value(x).shape
    if min(dims[1:]) < 0:
        raise ctx.error(f"3-D ops need static channel and spatial dims, got {list(dims)}")
    return dims


def _reshape(ctx: ImportContext, x: str, dims: list[int], output: str | None = None) -> str:
    return ctx.emit1("Reshape", [x, ctx.add_const(np.array(dims, np.int64), "shape")], output)


def _transpose(ctx: ImportContext, x: str, perm: list[int], output: str | None = None) -> str:
    return ctx.emit1("Transpose", [x], output, perm=perm)


def _kernel(ctx: ImportContext, w: str) -> list[int]:
    return [int(k) for k in ctx.attr("kernel_shape", ctx.value(w).shape[2:])]


def pool_3d(ctx: ImportContext, x: str, kernel: list[int], **pool: Any) -> None:
    _, c, d, h, w = _static_dims(ctx, x)
    axes = _axes(ctx, kernel)
    planes = ctx.nhwc_op("Pooling", _reshape(ctx, x, [0, c * d, h, w]), [], None, **axes.hw(), **pool)
    oh, ow = ctx.value(planes).shape[2:]
    depth = ctx.nhwc_op("Pooling", _reshape(ctx, planes, [0, c, d, oh * ow]), [], None, kernel_h=kernel[0],
                        kernel_w=1, stride_h=axes.stride[0], dilation_h=axes.dilation[0], pad_top=axes.begin[0],
                        pad_bottom=axes.end[0], pad_mode=axes.pad_mode, **pool)
    _reshape(ctx, depth, [0, c, ctx.value(depth).shape[2], oh, ow], ctx.outputs[0])


def conv_3d(ctx: ImportContext, group: int) -> None:
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    _, c, d, h, wd = _static_dims(ctx, x)
    out_c, in_per_group = _static_dims(ctx, w)[:2]
    axes = _axes(ctx, _kernel(ctx, w))
    kd = axes.kernel[0]
    try:
        depth = make_window(d, kd, axes.stride[0], axes.dilation[0], axes.pad_mode, axes.begin[0], axes.end[0])
    except ValueError as e:
        raise ctx.error(str(e)) from None
    if depth.pad_begin or depth.pad_end:
        pads = np.zeros((2, 5), np.int64)
        pads[:, 2] = depth.pad_begin, depth.pad_end
        x = ctx.emit1("Pad", [x, ctx.add_const(pads.ravel(), "depth_pads")], mode=fb.PaddingFill.CONSTANT)
    taps = np.arange(depth.out)[:, None] * depth.stride + np.arange(kd)[None, :] * depth.dilation
    windows = ctx.emit1("Gather", [x, ctx.add_const(taps.astype(np.int64), "depth_taps")], axis=2)
    unfolded = _reshape(ctx, _transpose(ctx, windows, [0, 2, 1, 3, 4, 5]), [-1, c * kd, h, wd])
    weight = _reshape(ctx, w, [out_c, in_per_group * kd, *axes.kernel[1:]])
    params = [_transpose(ctx, weight, [0, 2, 3, 1])] + ([b] if b else [])
    y = ctx.nhwc_op("Conv2D", unfolded, params, None, group=group, in_channel=c * kd, out_channel=out_c,
                    **axes.hw())
    oh, ow = ctx.value(y).shape[2:]
    _transpose(ctx, _reshape(ctx, y, [-1, depth.out, out_c, oh, ow]), [0, 2, 1, 3, 4], ctx.outputs[0])


def conv_transpose_3d(ctx: ImportContext, group: int) -> None:
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    _, c, d, h, wd = _static_dims(ctx, x)
    out_per_group = _static_dims(ctx, w)[1]
    axes = _axes(ctx, _kernel(ctx, w))
    kd, out_c = axes.kernel[0], out_per_group * group
    output_pad = [int(v) for v in ctx.attr("output_padding", [0, 0, 0])]
    output_shape = [int(v) for v in ctx.attr("output_shape", [])][-3:] or [0, 0, 0]
    if len(output_pad) != 3 or len(output_shape) != 3:
        raise ctx.error("3-D ConvTranspose needs 3 output_padding and output_shape values")
    try:
        depth = transposed_axis(d, kd, axes.stride[0], axes.dilation[0], output_pad[0], axes.pad_mode,
                                axes.begin[0], axes.end[0], output_shape[0])
    except ValueError as e:
        raise ctx.error(str(e)) from None
    planes = _reshape(ctx, _transpose(ctx, x, [0, 2, 1, 3, 4]), [-1, c, h, wd])
    weight = _reshape(ctx, w, [c, out_per_group * kd, *axes.kernel[1:]])
    y = ctx.nhwc_op("Conv2DTranspose", planes, [_transpose(ctx, weight, [0, 2, 3, 1])], None, group=group,
                    in_channel=c, out_channel=out_c * kd, output_pad_h=output_pad[1], output_pad_w=output_pad[2],
                    output_h=output_shape[1], output_w=output_shape[2], **axes.hw())
    oh, ow = ctx.value(y).shape[2:]
    taps = _reshape(ctx, _transpose(ctx, _reshape(ctx, y, [-1, d, out_c, kd, oh, ow]), [0, 2, 4, 5, 1, 3]),
                    [-1, out_c, oh, ow, d * kd])
    z = (np.arange(d)[:, None] * depth.stride + np.arange(kd)[None, :] * depth.dilation - depth.pad_begin).ravel()
    col2im = (np.arange(depth.out)[:, None] == z[None, :]).astype(np.float32)     # [OD, D*KD]
    y = ctx.emit1("FullConnection", [taps, ctx.add_const(col2im, "depth_col2im")])
    if not b:
        _transpose(ctx, y, [0, 1, 4, 2, 3], ctx.outputs[0])
        return
    y = _transpose(ctx, y, [0, 1, 4, 2, 3])
    ctx.emit("Add", [y, _reshape(ctx, b, [out_c, 1, 1, 1])], ctx.outputs[:1])
