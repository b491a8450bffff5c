"""ONNX importer rules for tensor plumbing: constants, identities, layout and shape manipulation, slicing,
gathering, padding, resizing and casts.

Parameters that old opsets give as attributes (Squeeze's axes, Split's split, Slice's starts, Pad's pads, ...)
become constant inputs, so each op has one form in the IR; the kernels read them at compile time.
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite import dtypes
from lite.kernels.pad import spread_pads
from lite.status import InvalidOpAttrError, LiteError
from schema import fb

INT32_MAX = 2**31 - 1
PAD_MODES = {"constant": fb.PaddingFill.CONSTANT, "reflect": fb.PaddingFill.REFLECT,
             "edge": fb.PaddingFill.EDGE, "wrap": fb.PaddingFill.WRAP}
RESIZE_MODES = {"nearest": fb.ResizeMode.NEAREST, "linear": fb.ResizeMode.LINEAR, "cubic": fb.ResizeMode.CUBIC}
COORDINATE_TRANSFORMS = {
    "half_pixel": fb.CoordinateTransform.HALF_PIXEL, "asymmetric": fb.CoordinateTransform.ASYMMETRIC,
    "align_corners": fb.CoordinateTransform.ALIGN_CORNERS,
    "pytorch_half_pixel": fb.CoordinateTransform.PYTORCH_HALF_PIXEL,
    "tf_half_pixel_for_nn": fb.CoordinateTransform.TF_HALF_PIXEL_FOR_NN,
    "half_pixel_symmetric": fb.CoordinateTransform.HALF_PIXEL_SYMMETRIC,
    "tf_crop_and_resize": fb.CoordinateTransform.TF_CROP_AND_RESIZE,
}
ASPECT_POLICIES = {"stretch": fb.AspectPolicy.STRETCH, "not_larger": fb.AspectPolicy.NOT_LARGER,
                   "not_smaller": fb.AspectPolicy.NOT_SMALLER}
NEAREST_ROUNDINGS = {"round_prefer_floor": fb.NearestRounding.ROUND_PREFER_FLOOR,
                     "round_prefer_ceil": fb.NearestRounding.ROUND_PREFER_CEIL,
                     "floor": fb.NearestRounding.FLOOR, "ceil": fb.NearestRounding.CEIL}


# ---- helpers ---------------------------------------------------------------------------------------------------
def _trim(inputs: list[str]) -> list[str]:
    """`inputs` without trailing omitted ("") entries."""
    while inputs and not inputs[-1]:
        inputs = inputs[:-1]
    return inputs


def _ints_param(ctx: ImportContext, name: str, index: int, since: int) -> str:
    """A 1-D int64 parameter: input `index` from opset `since` on, the attribute `name` before ("" if absent)."""
    if ctx.opset >= since:
        return ctx.input(index)
    if not ctx.has_attr(name):
        return ""
    return ctx.add_const(np.array(ctx.attr(name), np.int64), name)


def _present_const(ctx: ImportContext, name: str, what: str) -> np.ndarray | None:
    """The constant value of an optional parameter input, None when it is omitted or empty."""
    if not name:
        return None
    value = ctx.require_const(name, what)
    return value if value.size else None


def _unless_empty(ctx: ImportContext, name: str) -> str:
    """`name`, or "" when it is an empty constant (ONNX's way of omitting an input in some opsets)."""
    value = ctx.const(name)
    return "" if value is not None and value.size == 0 else name


def _type_id(ctx: ImportContext, dtype: np.dtype, what: str) -> int:
    """Our TypeId for a numpy dtype; `what` names the use in the error raised for unsupported ones."""
    try:
        return dtypes.from_numpy(dtype)
    except LiteError:
        raise ctx.error(f"{what} is not supported") from None


def _onnx_type_id(ctx: ImportContext, onnx_type: int, what: str) -> int:
    """Our TypeId for an ONNX TensorProto data type; unsupported types (string, bfloat16, float8...) raise."""
    try:
        name = TensorProto.DataType.Name(onnx_type)
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(onnx_type))
    except (KeyError, ValueError, TypeError):
        raise ctx.error(f"{what} unknown ONNX data type {onnx_type}") from None
    return _type_id(ctx, dtype, f"{what} {name}")


def _dims_vector(ctx: ImportContext, x: str, overrides: dict[int, int]) -> str:
    """A 1-D int64 vector of x's dims with `overrides` replacing some of them: a constant when the other dims
    are static, else Shape slices joined by Concat (folded once the input shape is known)."""
    shape = ctx.value(x).shape
    dims = [overrides.get(d, n) for d, n in enumerate(shape)]
    if min(dims, default=0) >= 0:
        return ctx.add_const(np.array(dims, np.int64), "dims")
    pieces = [ctx.add_const(np.array([dims[d]], np.int64), "dim") if d in overrides
              else ctx.emit1("Shape", [x], start=d, end=d + 1) for d in range(len(shape))]
    return ctx.emit1("Concat", pieces, axis=0)


def _axes(ctx: ImportContext, axes: list[int], rank: int) -> list[int]:
    if any(not -rank <= a < rank for a in axes) or len(set(a % rank for a in axes)) != len(axes):
        raise ctx.error(f"axes {axes} are invalid for rank {rank}")
    return [a % rank for a in axes]


# ---- constants, identities, casts -----------------------------------------------------------------------------
@onnx_op("Constant")
def constant(ctx: ImportContext) -> None:
    for key in ("value_string", "value_strings", "sparse_value"):
        if ctx.has_attr(key):
            raise ctx.error(f"{key} constants are not supported")
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if ctx.has_attr(key):
            array = np.asarray(ctx.attr(key))
            if key.startswith("value_float"):
                array = array.astype(np.float32)
            elif key.startswith("value_int"):
                array = array.astype(np.int64)
            _type_id(ctx, array.dtype, f"a constant of type {array.dtype}")
            name = ctx.graph.add_const(array, ctx.outputs[0])
            if name != ctx.outputs[0]:
                raise ctx.error(f"output name '{ctx.outputs[0]}' is already taken")
            return
    raise ctx.error("the node has no value attribute")


@onnx_op("ConstantOfShape")
def constant_of_shape(ctx: ImportContext) -> None:
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    if value.size != 1:
        raise ctx.error(f"value must hold one element, it has {value.size}")
    fill = value.ravel()[0]
    if value.dtype.kind in "iu" and int(float(fill)) != int(fill):
        raise ctx.error(f"value {fill} cannot be stored exactly")
    data_type = _type_id(ctx, value.dtype, f"value type {value.dtype}")
    ctx.emit("ConstantOfShape", [ctx.input(0)], ctx.outputs, data_type=data_type, value=float(fill))


@onnx_op("Identity")
def identity(ctx: ImportContext) -> None:
    ctx.emit("Identity", [ctx.input(0)], ctx.outputs)


@onnx_op("Dropout")
def dropout(ctx: ImportContext) -> None:
    """Inference Dropout is the identity; a requested mask is all ones (bool from opset 10, x's type before).
    A training_mode known only at run time keeps a run-time Dropout (lite/kernels/dropout.py); without it the op
    is the identity whatever the ratio (ONNX: training_mode defaults to false)."""
    x = ctx.input(0)
    ratio = ctx.attr("ratio", 0.5)
    if ctx.opset >= 12 and len(ctx.inputs) > 2 and ctx.inputs[2] and ctx.const(ctx.inputs[2]) is None:
        mask = ctx.outputs[1] if len(ctx.outputs) > 1 and ctx.outputs[1] else 2    # two outputs: never bypassed
        outputs = [ctx.outputs[0], mask] if isinstance(mask, str) else ctx.outputs[:1] + [ctx.graph.fresh(
            f"{ctx.name}:mask")]
        ctx.emit("Dropout", _trim([x, ctx.input(1), ctx.input(2)]), outputs)
        return
    if ctx.opset >= 12:
        given = ctx.const(ctx.input(1))
        ratio = float(given.ravel()[0]) if given is not None and given.size else 0.5
        training = _present_const(ctx, ctx.input(2), "training_mode")
        if training is not None and bool(training.ravel()[0]) and ratio != 0:
            raise ctx.error("training-mode Dropout (random) is not supported: export the model for inference")
    ctx.emit("Dropout", [x], ctx.outputs[:1], ratio=float(ratio))
    if len(ctx.outputs) > 1 and ctx.outputs[1]:
        dtype = np.dtype(np.bool_) if ctx.opset >= 10 else ctx.value(x).dtype
        mask_type = _type_id(ctx, dtype, f"a {dtype} mask")
        ctx.emit("ConstantOfShape", [ctx.emit1("Shape", [x])], [ctx.outputs[1]], data_type=mask_type, value=1.0)


CAST_ROUNDINGS = {"up": fb.CastRounding.UP, "nearest": fb.CastRounding.NEAREST, "down": fb.CastRounding.DOWN}


def _cast_attrs(ctx: ImportContext) -> dict:
    """saturate (float8 targets, opset 19+) and round_mode (float8e8m0 targets, opset 24+)."""
    mode = ctx.attr("round_mode", "up")
    if mode not in CAST_ROUNDINGS:
        raise ctx.error(f"round_mode '{mode}' is not supported")
    return {"saturate": bool(ctx.attr("saturate", 1)), "round_mode": CAST_ROUNDINGS[mode]}


@onnx_op("Cast")
def cast(ctx: ImportContext) -> None:
    ctx.emit("Cast", [ctx.input(0)], ctx.outputs, to=_onnx_type_id(ctx, ctx.attr("to"), "Cast to"),
             **_cast_attrs(ctx))


@onnx_op("CastLike")
def cast_like(ctx: ImportContext) -> None:
    dtype = ctx.value(ctx.input(1)).dtype
    to = _type_id(ctx, dtype, f"CastLike to {dtype}")
    ctx.emit("Cast", [ctx.input(0)], ctx.outputs, to=to, **_cast_attrs(ctx))


@onnx_op("Shape")
def shape(ctx: ImportContext) -> None:
    start, end = (int(np.clip(v, -INT32_MAX - 1, INT32_MAX)) for v in (ctx.attr("start", 0),
                                                                         ctx.attr("end", INT32_MAX)))
    ctx.emit("Shape", [ctx.input(0)], ctx.outputs, start=start, end=end)


# ---- layout and shape -----------------------------------------------------------------------------------------
@onnx_op("Transpose")
def transpose(ctx: ImportContext) -> None:
    rank = ctx.value(ctx.input(0)).rank
    perm = ctx.attr("perm", list(range(rank))[::-1])
    ctx.emit("Transpose", [ctx.input(0)], ctx.outputs, perm=list(perm))


@onnx_op("Reshape")
def reshape(ctx: ImportContext) -> None:
    ctx.emit("Reshape", [ctx.input(0), ctx.input(1)], ctx.outputs, allowzero=bool(ctx.attr("allowzero", 0)))


@onnx_op("Flatten")
def flatten(ctx: ImportContext) -> None:
    rank, axis = ctx.value(ctx.input(0)).rank, ctx.attr("axis", 1)
    if not -rank <= axis <= rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank}", InvalidOpAttrError)
    ctx.emit("Flatten", [ctx.input(0)], ctx.outputs, axis=axis + rank if axis < 0 else axis)


@onnx_op("Squeeze", "Unsqueeze")
def squeeze(ctx: ImportContext) -> None:
    axes = _ints_param(ctx, "axes", 1, since=13)
    ctx.emit(ctx.node.op_type, _trim([ctx.input(0), axes]), ctx.outputs)


@onnx_op("Concat")
def concat(ctx: ImportContext) -> None:
    if not ctx.has_attr("axis"):
        raise ctx.error("the axis attribute is required")
    ctx.emit("Concat", ctx.inputs, ctx.outputs, axis=ctx.attr("axis"))


@onnx_op("Split")
def split(ctx: ImportContext) -> None:
    parts = ctx.attr("num_outputs", len(ctx.outputs))
    if parts != len(ctx.outputs):
        raise ctx.error(f"num_outputs is {parts} but the node has {len(ctx.outputs)} outputs")
    sizes = _ints_param(ctx, "split", 1, since=13)
    ctx.emit("Split", _trim([ctx.input(0), sizes]), ctx.outputs, axis=ctx.attr("axis", 0))


@onnx_op("Slice")
def slice_(ctx: ImportContext) -> None:
    if ctx.opset >= 10:
        params = [ctx.input(k) for k in range(1, 5)]
    else:
        params = [_ints_param(ctx, name, 0, since=10) for name in ("starts", "ends", "axes")]
    ctx.emit("Slice", _trim([ctx.input(0), *params]), ctx.outputs)


@onnx_op("Gather")
def gather(ctx: ImportContext) -> None:
    ctx.emit("Gather", [ctx.input(0), ctx.input(1)], ctx.outputs, axis=ctx.attr("axis", 0))


# ---- padding and resizing -------------------------------------------------------------------------------------
@onnx_op("Pad")
def pad(ctx: ImportContext) -> None:
    mode = ctx.attr("mode", "constant")
    if mode not in PAD_MODES:
        raise ctx.error(f"pad mode '{mode}' is not supported (supported: {', '.join(PAD_MODES)})")
    x = ctx.input(0)
    if ctx.opset < 11:
        pads = ctx.add_const(np.array(ctx.attr("pads"), np.int64), "pads")
        value = ctx.add_const(np.array(ctx.attr("value", 0.0), np.float32), "value")
    else:
        pads, value = ctx.input(1), _unless_empty(ctx, ctx.input(2))
        axes = ctx.input(3)
        if axes and ctx.const(pads) is not None and ctx.const(axes) is not None:   # spread now: one form
            pads = ctx.add_const(_full_pads(ctx, ctx.const(pads), ctx.const(axes)), "pads")
        elif axes:
            ctx.emit("Pad", [x, pads, value, axes], ctx.outputs, mode=PAD_MODES[mode])
            return
    ctx.emit("Pad", _trim([x, pads, value]), ctx.outputs, mode=PAD_MODES[mode])


def _full_pads(ctx: ImportContext, pads: np.ndarray, axes: np.ndarray) -> np.ndarray:
    """Pads for the listed `axes` ([begins..., ends...]) spread over all axes of the input."""
    rank = ctx.value(ctx.input(0)).rank
    try:
        return np.array(spread_pads([int(p) for p in pads.ravel()], _axes(ctx, [int(a) for a in axes.ravel()],
                                                                          rank), rank), np.int64)
    except ValueError as e:
        raise ctx.error(str(e)) from None


@onnx_op("Resize", "Upsample")
def resize(ctx: ImportContext) -> None:
    mode = ctx.attr("mode", "nearest")
    if mode not in RESIZE_MODES or ctx.node.op_type == "Upsample" and mode == "cubic":
        raise ctx.error(f"mode '{mode}' is not supported")
    if ctx.node.op_type == "Upsample" or ctx.opset < 11:
        roi, scales, sizes = "", _legacy_scales(ctx), ""
        attrs = _legacy_resize_attrs(mode)
    else:
        roi = _resize_roi(ctx)
        raw = ctx.has_attr("axes") and bool(roi) and ctx.const(roi) is None
        scales, sizes, attrs = *_resize_inputs(ctx, raw), _resize_attrs(ctx)
        attrs.update(_run_time_axes(ctx, scales, sizes, raw))
        roi = _spread_roi(ctx, roi) if roi and not attrs.get("axes") else roi
    ctx.emit("Resize", _trim([ctx.input(0), roi, scales, sizes]), ctx.outputs, mode=RESIZE_MODES[mode], **attrs)


def _resize_roi(ctx: ImportContext) -> str:
    """The roi input of tf_crop_and_resize ("" for the other transforms, which ignore it)."""
    if ctx.attr("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize":
        return ""
    return _unless_empty(ctx, ctx.input(1))


def _spread_roi(ctx: ImportContext, roi: str) -> str:
    """A constant roi given for `axes` spread into [starts..., ends...] of every axis (the others keep the
    whole axis)."""
    if not ctx.has_attr("axes"):
        return roi
    rank = ctx.value(ctx.input(0)).rank
    axes = _axes(ctx, list(ctx.attr("axes")), rank)
    values = ctx.require_const(roi, "roi with axes").ravel()
    if values.size != 2 * len(axes):
        raise ctx.error(f"roi has {values.size} values for {len(axes)} axes")
    full = np.array([[0.0] * rank, [1.0] * rank], np.float32)
    full[:, axes] = values.reshape(2, len(axes))
    return ctx.add_const(full.ravel(), "roi")


def _legacy_scales(ctx: ImportContext) -> str:
    """The scales of Upsample (an attribute before opset 9, an input after) and Resize-10."""
    if ctx.node.op_type == "Upsample" and ctx.opset < 9:
        return ctx.add_const(np.array(ctx.attr("scales"), np.float32), "scales")
    return ctx.input(1)


def _legacy_resize_attrs(mode: str) -> dict:
    """Upsample and Resize-10: asymmetric coordinates, and nearest rounding that floors when upsampling and
    ceils when downsampling (onnxruntime's behaviour), decided by the kernel from the scales."""
    attrs = {"coordinate_transform": fb.CoordinateTransform.ASYMMETRIC}
    if mode == "nearest":
        attrs["nearest_rounding"] = fb.NearestRounding.BY_SCALES
    return attrs


def _resize_attrs(ctx: ImportContext) -> dict:
    """The Resize attributes of opset 11+."""
    transform = ctx.attr("coordinate_transformation_mode", "half_pixel")
    rounding = ctx.attr("nearest_mode", "round_prefer_floor")
    if transform not in COORDINATE_TRANSFORMS:
        raise ctx.error(f"coordinate_transformation_mode '{transform}' is not supported")
    if rounding not in NEAREST_ROUNDINGS:
        raise ctx.error(f"nearest_mode '{rounding}' is not supported")
    return {"antialias": bool(ctx.attr("antialias", 0)), "coordinate_transform": COORDINATE_TRANSFORMS[transform],
            "nearest_rounding": NEAREST_ROUNDINGS[rounding],
            "cubic_coeff_a": float(ctx.attr("cubic_coeff_a", -0.75)),
            "exclude_outside": bool(ctx.attr("exclude_outside", 0)),
            "extrapolation_value": float(ctx.attr("extrapolation_value", 0.0))}


def _resize_inputs(ctx: ImportContext, raw: bool) -> tuple[str, str]:
    """(scales, sizes) of Resize-11+, with `axes` and keep_aspect_ratio_policy spread into full-rank values so
    the kernel sees one form; left as given when `raw` (a run-time roi: the kernel spreads all three). An
    empty constant counts as omitted."""
    scales, sizes = (_unless_empty(ctx, ctx.input(k)) for k in (2, 3))
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise ctx.error(f"keep_aspect_ratio_policy '{policy}' is not supported")
    if not ctx.has_attr("axes") and (policy == "stretch" or not sizes):
        return scales, sizes
    x = ctx.input(0)
    rank = ctx.value(x).rank
    axes = _axes(ctx, list(ctx.attr("axes", range(rank))), rank)
    which, name = ("sizes", sizes) if sizes else ("scales", scales)
    if ctx.const(name) is None or raw:
        return scales, sizes            # the kernel spreads them (_run_time_axes)
    values = ctx.const(name).ravel()
    if values.size != len(axes):
        raise ctx.error(f"{which} has {values.size} values for {len(axes)} axes")
    if not sizes:
        full = np.ones(rank, np.float32)
        full[axes] = values
        return ctx.add_const(full, "scales"), ""
    out = dict(zip(axes, (int(s) for s in values)))
    if policy == "stretch":
        return "", _dims_vector(ctx, x, out)
    return _keep_aspect_ratio(ctx, x, out, policy)


def _run_time_axes(ctx: ImportContext, scales: str, sizes: str, raw: bool) -> dict:
    """Resize's `axes` and aspect policy, for the kernel to apply to scales / sizes (and, when `raw`, the roi)
    known only at run time."""
    name = sizes or scales
    if not name or ctx.const(name) is not None and not raw or not (ctx.has_attr("axes") or sizes):
        return {}
    rank = ctx.value(ctx.input(0)).rank
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    return {"axes": _axes(ctx, list(ctx.attr("axes", range(rank))), rank),
            "aspect_policy": ASPECT_POLICIES[policy]}


def _keep_aspect_ratio(ctx: ImportContext, x: str, sizes: dict[int, int], policy: str) -> tuple[str, str]:
    """(scales, sizes) for keep_aspect_ratio_policy: one scale for every listed axis, the smallest (not_larger)
    or largest (not_smaller) of sizes / dims, and output dims rounded half up from it."""
    shape = ctx.value(x).shape
    if min(shape[a] for a in sizes) <= 0:
        raise ctx.error("keep_aspect_ratio_policy needs static, non-empty resized dims")
    ratios = [n / shape[a] for a, n in sizes.items()]
    scale = min(ratios) if policy == "not_larger" else max(ratios)
    full = np.ones(len(shape), np.float64)
    full[list(sizes)] = scale
    out = {a: int(scale * shape[a] + 0.5) for a in sizes}
    return ctx.add_const(full, "scales"), _dims_vector(ctx, x, out)
