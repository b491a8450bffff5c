"""ONNX importer rules for the neural-network ops: convolutions, GEMM/MatMul, normalisations, pooling, softmax.

Spatial ops (Conv, ConvTranspose, pooling, LRN) run on NHWC inside the graph: the rules wrap them in layout
transposes (`ctx.nhwc_op`) that the to_nhwc pass later cancels between neighbours. 1-D variants ([N, C, L]) run
as 2-D ops with H = 1; 3-D Conv, ConvTranspose and pooling are built from the 2-D ops (`volumetric`). Weights
are re-laid out with a Transpose node, which folds to a constant at import when the weight is constant (and runs
in the graph when it is a graph input).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules import volumetric
from lite.status import InvalidOpAttrError
from schema import fb

_PAD_MODES = {"NOTSET": fb.PadMode.PAD, "SAME_UPPER": fb.PadMode.SAME_UPPER,
              "SAME_LOWER": fb.PadMode.SAME_LOWER, "VALID": fb.PadMode.VALID}
OIHW_TO_OHWI = [0, 2, 3, 1]     # also ConvTranspose's [I, O/G, KH, KW] -> IHWO


# ---- spatial helpers ------------------------------------------------------------------------------------------
def _spatial_dims(ctx: ImportContext, name: str) -> int:
    """1 or 2: the spatial rank of the NC... tensor `name`; anything else is refused."""
    rank = ctx.value(name).rank
    if rank not in (3, 4):
        raise ctx.error(f"input '{name}' has rank {rank}: only 1-D and 2-D (rank 3 and 4) inputs are supported")
    return rank - 2


def _hw(ctx: ImportContext, name: str, values: Sequence[int], spatial: int, lifted: int) -> tuple[int, int]:
    """(h, w) of a per-axis ONNX attribute; a 1-D op gets `lifted` for the inserted H axis."""
    values = [int(v) for v in values]
    if len(values) != spatial:
        raise ctx.error(f"attribute '{name}' has {len(values)} values for {spatial} spatial axes")
    return (lifted, values[0]) if spatial == 1 else (values[0], values[1])


def _window_attrs(ctx: ImportContext, spatial: int, kernel: tuple[int, int]) -> dict[str, Any]:
    """Kernel, strides, dilations and padding of a Conv/ConvTranspose/pool node as our attribute names."""
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad not in _PAD_MODES:
        raise ctx.error(f"auto_pad '{auto_pad}' is not one of {sorted(_PAD_MODES)}")
    pads = list(ctx.attr("pads", [0] * 2 * spatial))
    if len(pads) != 2 * spatial:
        raise ctx.error(f"attribute 'pads' has {len(pads)} values for {spatial} spatial axes")
    stride = _hw(ctx, "strides", ctx.attr("strides", [1] * spatial), spatial, 1)
    dilation = _hw(ctx, "dilations", ctx.attr("dilations", [1] * spatial), spatial, 1)
    begin = _hw(ctx, "pads", pads[:spatial], spatial, 0)
    end = _hw(ctx, "pads", pads[spatial:], spatial, 0)
    return dict(kernel_h=kernel[0], kernel_w=kernel[1], stride_h=stride[0], stride_w=stride[1],
                dilation_h=dilation[0], dilation_w=dilation[1], pad_mode=_PAD_MODES[auto_pad],
                pad_top=begin[0], pad_left=begin[1], pad_bottom=end[0], pad_right=end[1])


def _h_axis(ctx: ImportContext) -> str:
    """The axis a 1-D op gains (and loses) to run as 2-D."""
    return ctx.add_const(np.array([2], np.int64), "h_axis")


def _lift(ctx: ImportContext, name: str, spatial: int) -> str:
    """[N, C, L] -> [N, C, 1, L] for 1-D ops (a no-op for 2-D)."""
    return ctx.emit1("Unsqueeze", [name, _h_axis(ctx)]) if spatial == 1 else name


def _emit_spatial(ctx: ImportContext, op: str, x: str, params: list[str], outputs: list[str] | None = None,
                  **attrs: Any) -> None:
    """Emit NHWC `op` on ONNX NC(H)W input `x`, writing `outputs` (default: the node's first output) in x's
    layout and rank."""
    spatial = _spatial_dims(ctx, x)
    outputs = outputs or ctx.outputs[:1]
    if spatial == 2 and len(outputs) == 1:
        ctx.nhwc_op(op, x, params, outputs[0], **attrs)
        return
    ys = ctx.emit(op, [ctx.to_nhwc(_lift(ctx, x, spatial)), *params], len(outputs), **attrs)
    for y, out in zip(ys, outputs):
        if spatial == 2:
            ctx.to_nchw(y, out)
        else:
            ctx.emit("Squeeze", [ctx.to_nchw(y), _h_axis(ctx)], [out])


def _kernel_shape(ctx: ImportContext, weight: str, spatial: int) -> tuple[int, int]:
    """From the `kernel_shape` attribute, else the weight's trailing dims (0 = take it from the weight)."""
    dims = ctx.attr("kernel_shape", [max(d, 0) for d in ctx.value(weight).shape[2:]])
    return _hw(ctx, "kernel_shape", dims, spatial, 1)


def _weight(ctx: ImportContext, weight: str, spatial: int) -> str:
    """ONNX [O, I, (KH,) KW] -> OHWI (or [I, O/G, ...] -> IHWO); folds at import for a constant weight."""
    return ctx.emit1("Transpose", [_lift(ctx, weight, spatial)], perm=OIHW_TO_OHWI)


def _checked_group(ctx: ImportContext) -> int:
    group = int(ctx.attr("group", 1))
    if group < 1:
        raise ctx.error(f"group {group} must be positive")
    return group


# ---- convolutions ---------------------------------------------------------------------------------------------
@onnx_op("Conv")
def conv(ctx: ImportContext) -> None:
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    group = _checked_group(ctx)
    if ctx.value(x).rank == 5:
        volumetric.conv_3d(ctx, group)
        return
    spatial = _spatial_dims(ctx, x)
    out_c, in_per_group = ctx.value(w).shape[:2]
    attrs = _window_attrs(ctx, spatial, _kernel_shape(ctx, w, spatial))
    params = [_weight(ctx, w, spatial)] + ([b] if b else [])
    _emit_spatial(ctx, "Conv2D", x, params, group=group, in_channel=max(in_per_group, 0) * group,
                  out_channel=max(out_c, 0), **attrs)


@onnx_op("ConvTranspose")
def conv_transpose(ctx: ImportContext) -> None:
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    group = _checked_group(ctx)
    if ctx.value(x).rank == 5:
        volumetric.conv_transpose_3d(ctx, group)
        return
    spatial = _spatial_dims(ctx, x)
    in_c, out_per_group = ctx.value(w).shape[:2]
    attrs = _window_attrs(ctx, spatial, _kernel_shape(ctx, w, spatial))
    output_pad = _hw(ctx, "output_padding", ctx.attr("output_padding", [0] * spatial), spatial, 0)
    output_shape = list(ctx.attr("output_shape", []))
    if len(output_shape) == spatial + 2:        # some exporters give [N, C, spatial...]
        output_shape = output_shape[2:]
    size = _hw(ctx, "output_shape", output_shape, spatial, 1) if output_shape else (0, 0)
    params = [_weight(ctx, w, spatial)] + ([b] if b else [])
    _emit_spatial(ctx, "Conv2DTranspose", x, params, group=group, in_channel=max(in_c, 0),
                  out_channel=max(out_per_group, 0) * group, output_pad_h=output_pad[0], output_pad_w=output_pad[1],
                  output_h=size[0], output_w=size[1], **attrs)


@onnx_op("DeformConv")
def deform_conv(ctx: ImportContext) -> None:
    """Opset 19+, 2-D: offsets and mask are NCHW maps of the output, re-laid out to NHWC like x."""
    x, w, offset, b, mask = (ctx.input(k) for k in range(5))
    if _spatial_dims(ctx, x) != 2:
        raise ctx.error("only 2-D deformable convolution is supported")
    out_c, in_per_group = ctx.value(w).shape[:2]
    group = _checked_group(ctx)
    offset_group = int(ctx.attr("offset_group", 1))
    params = [_weight(ctx, w, 2), ctx.to_nhwc(offset), b, ctx.to_nhwc(mask) if mask else ""]
    while not params[-1]:
        params.pop()
    _emit_spatial(ctx, "DeformConv", x, params, group=group, in_channel=max(in_per_group, 0) * group,
                  out_channel=max(out_c, 0), offset_group=offset_group,
                  **_window_attrs(ctx, 2, _kernel_shape(ctx, w, 2)))


# ---- GEMM -----------------------------------------------------------------------------------------------------
def _times(ctx: ImportContext, name: str, factor: float, output: str | None = None) -> str:
    return ctx.emit1("Mul", [name, ctx.add_const(np.array(factor, np.float32), "scale")], output)


def _row_bias(c: np.ndarray | None, columns: int) -> bool:
    """Whether constant C broadcasts over the rows of an [M, columns] result (a scalar, [N] or [1, N])."""
    return c is not None and c.size in (1, columns) and (c.ndim < 2 or c.shape[0] == 1)


@onnx_op("Gemm")
def gemm(ctx: ImportContext) -> None:
    """Y = alpha * A' @ B' + beta * C. Constant B -> FullConnection with alpha (and a row-vector C) folded into
    its constants; otherwise MatMul followed by Mul / Add."""
    a, b, c = ctx.input(0), ctx.input(1), ctx.input(2)
    alpha, beta = float(ctx.attr("alpha", 1.0)), float(ctx.attr("beta", 1.0))
    trans_b = bool(ctx.attr("transB", 0))
    if ctx.attr("transA", 0):
        a = ctx.emit1("Transpose", [a], perm=[1, 0])
    if beta == 0.0:
        c = ""
    out = ctx.outputs[0]
    product_out = None if c else out        # the product is the result when there is no C
    weight, c_value = ctx.const(b), ctx.const(c)
    if weight is not None:
        w = np.ascontiguousarray((weight if trans_b else weight.T) * np.float32(alpha), dtype=np.float32)
        inputs = [a, ctx.add_const(w, "weight")]
        if c and _row_bias(c_value, w.shape[0]):
            bias = np.broadcast_to(np.float32(beta) * c_value.astype(np.float32).reshape(-1), (w.shape[0],))
            ctx.emit("FullConnection", inputs + [ctx.add_const(bias, "bias")], [out])
            return
        y = ctx.emit1("FullConnection", inputs, product_out)
    else:
        y = ctx.emit1("MatMul", [a, b], product_out if alpha == 1.0 else None, transpose_b=trans_b)
        if alpha != 1.0:
            y = _times(ctx, y, alpha, product_out)
    if c:
        if c_value is not None:
            bias = ctx.add_const(np.float32(beta) * c_value.astype(np.float32), "bias")
        else:
            bias = c if beta == 1.0 else _times(ctx, c, beta)
        ctx.emit("Add", [y, bias], [out])


@onnx_op("MatMul")
def matmul(ctx: ImportContext) -> None:
    """A constant 2-D B makes a FullConnection (weight B^T, copied once here); otherwise a MatMul."""
    a, b = ctx.input(0), ctx.input(1)
    weight = ctx.const(b)
    if weight is not None and weight.ndim == 2 and weight.dtype == np.float32:
        ctx.emit("FullConnection", [a, ctx.add_const(np.ascontiguousarray(weight.T), "weight")], ctx.outputs)
    else:
        ctx.emit("MatMul", [a, b], ctx.outputs)


# ---- normalisation --------------------------------------------------------------------------------------------
def _refuse_extra_outputs(ctx: ImportContext, what: str) -> None:
    extra = [o for o in ctx.outputs[1:] if o]
    if extra:
        raise ctx.error(f"outputs {extra} ({what}) are not supported: only the first output is computed")


@onnx_op("BatchNormalization")
def batch_normalization(ctx: ImportContext) -> None:
    if ctx.attr("training_mode", 0):
        _batch_norm_training(ctx)
        return
    if ctx.attr("spatial", 1) != 1:
        raise ctx.error("spatial=0 (per-element statistics) is not supported")
    _refuse_extra_outputs(ctx, "training statistics")
    ctx.emit("BatchNorm", ctx.inputs[:5], ctx.outputs[:1], epsilon=float(ctx.attr("epsilon", 1e-5)),
             momentum=float(ctx.attr("momentum", 0.9)), axis=1)


def _batch_norm_training(ctx: ImportContext) -> None:
    """training_mode=1 (opset 14+): normalise with the batch statistics (biased variance) and output the updated
    running statistics m * running + (1 - m) * batch, spelled out with Reduce and elementwise nodes (the graph's
    BatchNorm op updates its statistics in place, which an inference graph's outputs cannot express)."""
    x, scale, bias, running_mean, running_var = ctx.inputs[:5]
    rank = ctx.value(x).rank
    if rank < 2:
        raise ctx.error(f"input of rank {rank} has no channel axis 1")
    dtype = ctx.value(x).dtype

    def scalar(value: float, hint: str) -> str:
        return ctx.add_const(np.array(value, dtype), hint)

    axes = ctx.add_const(np.array([0, *range(2, rank)], np.int64), "axes")
    to_channels = ctx.add_const(np.array([-1] + [1] * (rank - 2), np.int64), "channel_shape")
    mean = ctx.emit1("Reduce", [x, axes], mode=fb.ReduceMode.MEAN, keep_dims=False)
    centered = ctx.emit1("Sub", [x, ctx.emit1("Reshape", [mean, to_channels])])
    var = ctx.emit1("Reduce", [ctx.emit1("Mul", [centered, centered]), axes], mode=fb.ReduceMode.MEAN,
                    keep_dims=False)
    std = ctx.emit1("Sqrt", [ctx.emit1("Add", [var, scalar(float(ctx.attr("epsilon", 1e-5)), "epsilon")])])
    factor = ctx.emit1("Reshape", [ctx.emit1("Div", [scale, std]), to_channels])
    ctx.emit("Add", [ctx.emit1("Mul", [centered, factor]), ctx.emit1("Reshape", [bias, to_channels])],
             ctx.outputs[:1])
    momentum = float(ctx.attr("momentum", 0.9))
    for running, batch, out in zip((running_mean, running_var), (mean, var), ctx.outputs[1:3]):
        if out:
            kept = ctx.emit1("Mul", [running, scalar(momentum, "momentum")])
            ctx.emit("Add", [kept, ctx.emit1("Mul", [batch, scalar(1.0 - momentum, "1-momentum")])], [out])


@onnx_op("LayerNormalization")
def layer_normalization(ctx: ImportContext) -> None:
    inputs = [ctx.input(0), ctx.input(1)] + ([ctx.input(2)] if ctx.input(2) else [])
    wanted = list(ctx.outputs) + [""] * (3 - len(ctx.outputs)) if len(ctx.outputs) > 1 else ctx.outputs[:1]
    outputs = [o or ctx.graph.fresh(f"{ctx.name}/unused") for o in wanted]     # y, or y, mean, invstd
    ctx.emit("LayerNorm", inputs, outputs, axis=int(ctx.attr("axis", -1)),
             epsilon=float(ctx.attr("epsilon", 1e-5)))


@onnx_op("LRN")
def lrn(ctx: ImportContext) -> None:
    size = ctx.attr("size")
    if size is None:
        raise ctx.error("attribute 'size' is required")
    _emit_spatial(ctx, "LRN", ctx.input(0), [], size=int(size), alpha=float(ctx.attr("alpha", 1e-4)),
                  beta=float(ctx.attr("beta", 0.75)), bias=float(ctx.attr("bias", 1.0)))


# ---- pooling ----------------------------------------------------------------------------------------------------
def _pool_attrs(ctx: ImportContext) -> dict[str, Any]:
    return dict(ceil_mode=bool(ctx.attr("ceil_mode", 0)), count_include_pad=bool(ctx.attr("count_include_pad", 0)))


def _pool(ctx: ImportContext, mode: int, outputs: list[str] | None = None, **extra: Any) -> None:
    x = ctx.input(0)
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise ctx.error("attribute 'kernel_shape' is required")
    if ctx.value(x).rank == 5:
        volumetric.pool_3d(ctx, x, [int(k) for k in kernel], mode=mode, **_pool_attrs(ctx), **extra)
        return
    spatial = _spatial_dims(ctx, x)
    attrs = _window_attrs(ctx, spatial, _hw(ctx, "kernel_shape", kernel, spatial, 1))
    _emit_spatial(ctx, "Pooling", x, [], outputs, mode=mode, **_pool_attrs(ctx), **extra, **attrs)


@onnx_op("MaxPool")
def max_pool(ctx: ImportContext) -> None:
    """The optional Indices output (opset 8+) is each maximum's index in the flattened NCHW input."""
    indices = len(ctx.outputs) > 1 and bool(ctx.outputs[1])
    if indices and ctx.value(ctx.input(0)).rank == 5:
        raise ctx.error("the Indices output of 3-D max pooling is not supported")
    _pool(ctx, fb.PoolMode.MAX, ctx.outputs[:2] if indices else None,
          storage_order=int(ctx.attr("storage_order", 0)))


@onnx_op("AveragePool")
def average_pool(ctx: ImportContext) -> None:
    _pool(ctx, fb.PoolMode.AVG)


@onnx_op("LpPool")
def lp_pool(ctx: ImportContext) -> None:
    """Opset 1 has a float p, later opsets an int one (default 2); padding counts as zero."""
    _pool(ctx, fb.PoolMode.LP, p=float(ctx.attr("p", 2)))


def _global_pool(ctx: ImportContext, mode: int, **extra: Any) -> None:
    x = ctx.input(0)
    if ctx.value(x).rank == 5:      # pool all of D, H, W: the same op on [N, C, D, H*W]
        n, c, d, h, w = ctx.value(x).shape
        x = ctx.emit1("Reshape", [x, ctx.add_const(np.array([0, c, d, h * w], np.int64), "planes")])
        y = ctx.nhwc_op("Pooling", x, [], None, mode=mode, global_pool=True, **extra)
        ctx.emit("Unsqueeze", [y, ctx.add_const(np.array([4], np.int64), "w_axis")], ctx.outputs[:1])
        return
    _emit_spatial(ctx, "Pooling", x, [], mode=mode, global_pool=True, **extra)


@onnx_op("GlobalMaxPool")
def global_max_pool(ctx: ImportContext) -> None:
    _global_pool(ctx, fb.PoolMode.MAX)


@onnx_op("GlobalAveragePool")
def global_average_pool(ctx: ImportContext) -> None:
    _global_pool(ctx, fb.PoolMode.AVG)


@onnx_op("GlobalLpPool")
def global_lp_pool(ctx: ImportContext) -> None:
    _global_pool(ctx, fb.PoolMode.LP, p=float(ctx.attr("p", 2)))


# ---- softmax --------------------------------------------------------------------------------------------------
def _softmax(ctx: ImportContext, op: str) -> None:
    """Opset >= 13: one axis. Older opsets coerce to 2-D around `axis` (default 1): the op runs over all
    trailing dims, i.e. Flatten(axis) -> op(axis=1) -> Reshape back, unless `axis` is already the last."""
    x = ctx.input(0)
    rank = ctx.value(x).rank
    if ctx.opset >= 13:
        ctx.emit(op, [x], ctx.outputs, axis=int(ctx.attr("axis", -1)))
        return
    axis = int(ctx.attr("axis", 1))
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}", InvalidOpAttrError)
    if axis % rank == rank - 1:
        ctx.emit(op, [x], ctx.outputs, axis=-1)
        return
    y = ctx.emit1(op, [ctx.emit1("Flatten", [x], axis=axis % rank)], axis=1)
    ctx.emit("Reshape", [y, ctx.emit1("Shape", [x])], ctx.outputs)


@onnx_op("Softmax")
def softmax(ctx: ImportContext) -> None:
    _softmax(ctx, "Softmax")


@onnx_op("LogSoftmax")
def log_softmax(ctx: ImportContext) -> None:
    _softmax(ctx, "LogSoftmax")


@onnx_op("Hardmax")
def hardmax(ctx: ImportContext) -> None:
    _softmax(ctx, "Hardmax")
