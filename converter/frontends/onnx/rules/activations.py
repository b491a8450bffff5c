"""ONNX importer rules for activations: Relu, LeakyRelu, Elu, Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu, Clip,
Softplus, Softsign, Mish, Celu, Selu, ThresholdedRelu, Shrink, Swish -> our Activation{type}; PRelu -> PReLU.

Clip with constant bounds becomes RELU6 for (0, 6), RELU for (0, +inf) and HARD_TANH otherwise; bounds known
only at run time, or integer inputs, become Maximum / Minimum nodes.
"""
from __future__ import annotations

import math

import numpy as np

from converter.frontends.onnx.registry import ImportContext, onnx_op
from lite import dtypes
from lite.status import InvalidOpAttrError
from schema import fb

A = fb.ActivationType

# ONNX op -> (our activation type, {ONNX attribute (= our field): ONNX default})
_ACTIVATIONS: dict[str, tuple[int, dict[str, float]]] = {
    "Relu": (A.RELU, {}),
    "Sigmoid": (A.SIGMOID, {}),
    "Tanh": (A.TANH, {}),
    "HardSwish": (A.HSWISH, {}),
    "LeakyRelu": (A.LEAKY_RELU, {"alpha": 0.01}),
    "Elu": (A.ELU, {"alpha": 1.0}),
    "HardSigmoid": (A.HSIGMOID, {"alpha": 0.2, "beta": 0.5}),
    "Softplus": (A.SOFTPLUS, {}),
    "Softsign": (A.SOFTSIGN, {}),
    "Mish": (A.MISH, {}),
    "Celu": (A.CELU, {"alpha": 1.0}),
    "ThresholdedRelu": (A.THRESHOLD_RELU, {"alpha": 1.0}),
}
# ONNX ops whose attributes have other names than our fields: op -> (type, {ONNX name: (our field, default)})
_RENAMED: dict[str, tuple[int, dict[str, tuple[str, float]]]] = {
    "Selu": (A.SELU, {"alpha": ("alpha", 1.67326319217681884765625), "gamma": ("beta", 1.05070102214813232421875)}),
    "Shrink": (A.SHRINK, {"lambd": ("alpha", 0.5), "bias": ("beta", 0.0)}),
}


def _is_float(ctx: ImportContext, name: str) -> bool:
    return ctx.value(name).dtype.kind == "f"


@onnx_op(*_ACTIVATIONS)
def activation(ctx: ImportContext) -> None:
    x = ctx.input(0)
    if ctx.node.op_type == "Relu" and not _is_float(ctx, x):       # integer Relu (opset 14)
        zero = ctx.add_const(np.zeros((), ctx.value(x).dtype), "zero")
        ctx.emit("Maximum", [x, zero], ctx.outputs)
        return
    kind, params = _ACTIVATIONS[ctx.node.op_type]
    attrs = {name: float(ctx.attr(name, default)) for name, default in params.items()}
    if kind == A.CELU and attrs["alpha"] == 0.0:
        raise ctx.error("alpha must not be 0", InvalidOpAttrError)
    ctx.emit("Activation", [x], ctx.outputs, type=kind, **attrs)


@onnx_op(*_RENAMED)
def renamed_activation(ctx: ImportContext) -> None:
    """Integer Shrink (ONNX allows it) runs in float64, exact for every int32 and truncated back like C's cast."""
    kind, params = _RENAMED[ctx.node.op_type]
    attrs = {field: float(ctx.attr(name, default)) for name, (field, default) in params.items()}
    x = ctx.input(0)
    if _is_float(ctx, x):
        ctx.emit("Activation", [x], ctx.outputs, type=kind, **attrs)
        return
    source = dtypes.from_numpy(ctx.value(x).dtype)
    wide = ctx.emit1("Activation", [ctx.emit1("Cast", [x], to=dtypes.DataType.FLOAT64)], type=kind, **attrs)
    ctx.emit("Cast", [wide], ctx.outputs, to=source)


@onnx_op("Swish")
def swish(ctx: ImportContext) -> None:
    emit_swish(ctx, ctx.input(0), float(ctx.attr("alpha", 1.0)), ctx.outputs[0])


def emit_swish(ctx: ImportContext, x: str, alpha: float, output: str | None = None) -> str:
    """x * sigmoid(alpha * x): our SWISH for alpha = 1, else spelled out."""
    if alpha == 1.0:
        return ctx.emit1("Activation", [x], output, type=A.SWISH)
    scaled = ctx.emit1("Mul", [x, ctx.add_const(np.array(alpha, ctx.value(x).dtype), "alpha")])
    return ctx.emit1("Mul", [x, ctx.emit1("Activation", [scaled], type=A.SIGMOID)], output)


@onnx_op("Gelu")
def gelu(ctx: ImportContext) -> None:
    """approximate='none' is our GELU, 'tanh' our GELU_TANH."""
    kinds = {"none": A.GELU, "tanh": A.GELU_TANH}
    approximate = ctx.attr("approximate", "none")
    if approximate not in kinds:
        raise ctx.error(f"approximate='{approximate}' is not supported (only 'none' and 'tanh')")
    ctx.emit("Activation", [ctx.input(0)], ctx.outputs, type=kinds[approximate])


@onnx_op("PRelu")
def prelu(ctx: ImportContext) -> None:
    ctx.emit("PReLU", [ctx.input(0), ctx.input(1)], ctx.outputs)


def _clip_bound(ctx: ImportContext, index: int, attr: str, unbounded: float) -> tuple[str, float | None]:
    """(input name or "", constant value or None when known only at run time) of Clip's min or max; an absent
    bound is ("", +-inf)."""
    if ctx.opset < 11:
        return "", float(ctx.attr(attr, unbounded))
    name = ctx.input(index)
    if not name:
        return "", unbounded
    value = ctx.const(name)
    if value is None:
        return name, None
    if value.size != 1:
        raise ctx.error(f"Clip's {attr} must be a scalar, got shape {value.shape}")
    return name, float(value.reshape(-1)[0])


@onnx_op("Clip")
def clip(ctx: ImportContext) -> None:
    x = ctx.input(0)
    (lo_name, lo), (hi_name, hi) = _clip_bound(ctx, 1, "min", -math.inf), _clip_bound(ctx, 2, "max", math.inf)
    if lo == -math.inf and hi == math.inf:
        ctx.emit("Identity", [x], ctx.outputs)
    elif lo is not None and hi is not None and _is_float(ctx, x):
        kind = A.RELU6 if (lo, hi) == (0.0, 6.0) else A.RELU if (lo, hi) == (0.0, math.inf) else A.HARD_TANH
        extra = {"min_val": lo, "max_val": hi} if kind == A.HARD_TANH else {}
        ctx.emit("Activation", [x], ctx.outputs, type=kind, **extra)
    else:
        _clamp_nodes(ctx, x, lo_name if lo != -math.inf else "", hi_name if hi != math.inf else "")


def _clamp_nodes(ctx: ImportContext, x: str, lo: str, hi: str) -> None:
    """min(max(x, lo), hi) as Maximum / Minimum nodes; an empty bound name is left out."""
    if lo:
        x = ctx.emit1("Maximum", [x, lo], None if hi else ctx.outputs[0])
    if hi:
        ctx.emit1("Minimum", [x, hi], ctx.outputs[0])
