"""MINDIR rules for the neural-network primitives: Conv2D, Conv2DTranspose, BiasAdd, BatchNorm,
MatMul/BatchMatMul/Dense, MaxPool/AvgPool, Softmax/LogSoftmax, LayerNorm.

MindSpore's spatial primitives are NCHW: as for ONNX, they run on NHWC inside the graph between transposes that
the to_nhwc pass cancels between neighbours (`ImportContext.nhwc_op`); Conv2D weights go OIHW -> OHWI, and
Conv2DTranspose's [I, O/G, KH, KW] -> IHWO.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from converter.frontends.mindir.registry import ImportContext, mindir_op
from schema import fb

OIHW_TO_OHWI = [0, 2, 3, 1]
# pad_mode: a string in attributes, an enum (MindSpore's PadMode) in 2.3+ inputs
PAD_MODES = {"pad": fb.PadMode.PAD, "same": fb.PadMode.SAME_UPPER, "valid": fb.PadMode.VALID,
             0: fb.PadMode.PAD, 1: fb.PadMode.SAME_UPPER, 2: fb.PadMode.VALID}
NCHW_FORMATS = ("NCHW", 0)       # data_format: a string in attributes, an enum (NCHW 0, NHWC 1) as an input


def _pair(ctx: ImportContext, value: Any, what: str) -> tuple[int, int]:
    """(h, w) of a window attribute given as an int, (h, w) or (1, 1, h, w)."""
    values = [int(v) for v in np.ravel(value)]
    if len(values) == 1:
        return values[0], values[0]
    if len(values) in (2, 4):
        return values[-2], values[-1]
    raise ctx.error(f"{what} {values} is not an int, (h, w) or (1, 1, h, w)")


def _pad_mode(ctx: ImportContext, value: Any) -> int:
    key = value.lower() if isinstance(value, str) else value
    if key not in PAD_MODES:
        raise ctx.error(f"pad_mode {value!r} is not supported")
    return PAD_MODES[key]


def _require_nchw(ctx: ImportContext, fmt: Any) -> None:
    if fmt not in NCHW_FORMATS:
        raise ctx.error(f"data format {fmt!r} is not supported (only NCHW)")


def _window(ctx: ImportContext, kernel: Any, stride: Any, pad_mode: Any, pads: Any = (0, 0, 0, 0),
            dilation: Any = 1) -> dict[str, Any]:
    kh, kw = _pair(ctx, kernel, "kernel_size")
    sh, sw = _pair(ctx, stride, "stride")
    dh, dw = _pair(ctx, dilation, "dilation")
    pads = [int(p) for p in np.ravel(pads)]
    if len(pads) not in (1, 4):
        raise ctx.error(f"pad {pads} is not an int or (top, bottom, left, right)")
    top, bottom, left, right = pads * 4 if len(pads) == 1 else pads
    return dict(kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw,
                pad_mode=_pad_mode(ctx, pad_mode), pad_top=top, pad_bottom=bottom, pad_left=left, pad_right=right)


@mindir_op("Conv2D")
def conv2d(ctx: ImportContext) -> None:
    """x NCHW, weight OIHW; `pad` is (top, bottom, left, right) in pad mode, "same" puts the odd pixel last."""
    x, w = ctx.input(0), ctx.input(1)
    _require_nchw(ctx, ctx.attrs.get("format", "NCHW"))
    group = int(ctx.attrs.get("group", 1))
    out_c, in_per_group = ctx.value(w).shape[:2]
    attrs = _window(ctx, ctx.attrs.get("kernel_size", ctx.value(w).shape[2:]), ctx.attrs.get("stride", 1),
                    ctx.attrs.get("pad_mode", "valid"), ctx.attrs.get("pad", 0), ctx.attrs.get("dilation", 1))
    weight = ctx.emit1("Transpose", [w], perm=OIHW_TO_OHWI)
    ctx.nhwc_op("Conv2D", x, [weight], group=group, in_channel=in_per_group * group, out_channel=out_c, **attrs)


@mindir_op("Conv2DTranspose")
def conv2d_transpose(ctx: ImportContext) -> None:
    """Inputs x, weight [I, O/G, KH, KW] and the output's NCHW shape. The padding is made explicit: "same" crops
    the odd pixel at the end (the gradient of Conv2D's "same"), and rows the window does not reach at the end
    become output padding."""
    x, w = ctx.input(0), ctx.input(1)
    _require_nchw(ctx, ctx.attrs.get("format", "NCHW"))
    in_c, out_per_group = ctx.value(w).shape[:2]
    group = int(ctx.attrs.get("group", 1))
    size = [int(v) for v in np.ravel(ctx.arg(2, "input_size", ()))]
    if len(size) != 4:
        raise ctx.error(f"output size {size} is not an NCHW shape")
    attrs = _window(ctx, ctx.attrs.get("kernel_size", ctx.value(w).shape[2:]), ctx.attrs.get("stride", 1),
                    ctx.attrs.get("pad_mode", "valid"), ctx.attrs.get("pad", 0), ctx.attrs.get("dilation", 1))
    mode = attrs.pop("pad_mode")
    for axis, (begin, end) in ((2, ("pad_top", "pad_bottom")), (3, ("pad_left", "pad_right"))):
        hw = "h" if axis == 2 else "w"
        full = attrs[f"stride_{hw}"] * (ctx.value(x).shape[axis] - 1) + (attrs[f"kernel_{hw}"] - 1) * \
            attrs[f"dilation_{hw}"] + 1
        if mode == fb.PadMode.VALID:
            attrs[begin] = attrs[end] = 0
        elif mode == fb.PadMode.SAME_UPPER:
            total = max(full - size[axis], 0)
            attrs[begin], attrs[end] = total // 2, total - total // 2
        extra = size[axis] - (full - attrs[begin] - attrs[end])
        if not 0 <= extra < max(attrs[f"stride_{hw}"], attrs[f"dilation_{hw}"]):
            raise ctx.error(f"output size {size} does not follow from the input, window and padding")
        attrs[f"output_pad_{hw}"] = extra
    weight = ctx.emit1("Transpose", [w], perm=OIHW_TO_OHWI)
    ctx.nhwc_op("Conv2DTranspose", x, [weight], group=group, in_channel=in_c, out_channel=out_per_group * group,
                pad_mode=fb.PadMode.PAD, **attrs)


@mindir_op("BiasAdd")
def bias_add(ctx: ImportContext) -> None:
    """Adds b along the channel axis (1, NCHW; rank 2 inputs are [N, C])."""
    x, b = ctx.input(0), ctx.input(1)
    _require_nchw(ctx, ctx.arg(2, "format", ctx.attrs.get("data_format", "NCHW")))
    rank = ctx.value(x).rank
    if rank > 2:
        b = ctx.emit1("Reshape", [b, ctx.add_const(np.array([-1] + [1] * (rank - 2), np.int64), "channels")])
    ctx.emit("Add", [x, b], [ctx.output])


@mindir_op("BatchNorm")
def batch_norm(ctx: ImportContext) -> None:
    """Inference form (is_training false): normalise with the moving statistics. MindSpore's momentum weighs the
    batch statistics (running = (1 - m) * running + m * batch), ours the running ones: ours = 1 - m."""
    if ctx.arg(5, "is_training", False):
        raise ctx.error("is_training=True (batch statistics) is not supported: export the network with "
                        "set_train(False)")
    _require_nchw(ctx, ctx.arg(8, "format", ctx.attrs.get("data_format", "NCHW")))
    ctx.emit("BatchNorm", [ctx.input(k) for k in range(5)], [ctx.item(0)],
             epsilon=float(ctx.arg(6, "epsilon", 1e-5)), momentum=1.0 - float(ctx.arg(7, "momentum", 0.1)), axis=1)


@mindir_op("MatMul", "BatchMatMul", "MatMulExt", "BatchMatMulExt")
def matmul(ctx: ImportContext) -> None:
    """A constant 2-D float weight on a 2-D input makes a FullConnection (weight [out, in]); otherwise MatMul."""
    a, b = ctx.input(0), ctx.input(1)
    ta, tb = bool(ctx.arg(2, "transpose_a", False)), bool(ctx.arg(3, "transpose_b", False))
    weight = ctx.const(b)
    if weight is not None and weight.ndim == 2 and weight.dtype == np.float32 and not ta \
            and ctx.value(a).rank == 2:
        fc_weight = weight if tb else np.ascontiguousarray(weight.T)
        ctx.emit("FullConnection", [a, ctx.add_const(fc_weight, "weight")], [ctx.output])
        return
    ctx.emit("MatMul", [a, b], [ctx.output], transpose_a=ta, transpose_b=tb)


@mindir_op("Dense")
def dense(ctx: ImportContext) -> None:
    """x @ w^T + b, w [out, in] (2-D x)."""
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    if ctx.value(x).rank == 2 and ctx.value(w).rank == 2:
        ctx.emit("FullConnection", [x, w] + ([b] if b else []), [ctx.output])
        return
    y = ctx.emit1("MatMul", [x, w], None if b else ctx.output, transpose_b=True)
    if b:
        ctx.emit("Add", [y, b], [ctx.output])


def _pool(ctx: ImportContext, mode: int) -> None:
    """MaxPool / AvgPool: kernel_size, strides, pad_mode, data_format (attributes, or inputs 1-4); averages
    leave the padding out of the count, as MindSpore's 'same' mode does."""
    _require_nchw(ctx, ctx.arg(4, "format", ctx.attrs.get("data_format", "NCHW")))
    attrs = _window(ctx, ctx.arg(1, "kernel_size", 1), ctx.arg(2, "strides", 1), ctx.arg(3, "pad_mode", "valid"))
    del attrs["dilation_h"], attrs["dilation_w"]
    ctx.nhwc_op("Pooling", ctx.input(0), [], mode=mode, count_include_pad=False, **attrs)


@mindir_op("MaxPool")
def max_pool(ctx: ImportContext) -> None:
    _pool(ctx, fb.PoolMode.MAX)


@mindir_op("AvgPool")
def avg_pool(ctx: ImportContext) -> None:
    _pool(ctx, fb.PoolMode.AVG)


def _axis(ctx: ImportContext, k: int, default: int = -1) -> int:
    """A single axis given as an int or a one-element tuple."""
    axis = np.ravel(ctx.arg(k, "axis", default))
    if axis.size != 1:
        raise ctx.error(f"axis {axis.tolist()} must be one axis")
    return int(axis[0])


@mindir_op("Softmax")
def softmax(ctx: ImportContext) -> None:
    ctx.emit("Softmax", [ctx.input(0)], [ctx.output], axis=_axis(ctx, 1))


@mindir_op("LogSoftmax")
def log_softmax(ctx: ImportContext) -> None:
    ctx.emit("LogSoftmax", [ctx.input(0)], [ctx.output], axis=_axis(ctx, 1))


@mindir_op("LayerNorm")
def layer_norm(ctx: ImportContext) -> None:
    """Normalise over the axes from begin_norm_axis on, scale and bias of the shape of those axes (MindSpore's
    begin_params_axis must equal begin_norm_axis: that is what nn.LayerNorm exports)."""
    x = ctx.input(0)
    rank = ctx.value(x).rank
    norm_axis = int(ctx.arg(3, "begin_norm_axis", 1)) % rank
    params_axis = int(ctx.arg(4, "begin_params_axis", 1)) % rank
    if norm_axis != params_axis:
        raise ctx.error(f"begin_params_axis {params_axis} differs from begin_norm_axis {norm_axis}")
    outputs = [ctx.item(0), ctx.graph.fresh(f"{ctx.name}/mean"), ctx.graph.fresh(f"{ctx.name}/invstd")]
    ctx.emit("LayerNorm", [x, ctx.input(1), ctx.input(2)], outputs, axis=norm_axis,
             epsilon=float(ctx.arg(5, "epsilon", 1e-7)))
