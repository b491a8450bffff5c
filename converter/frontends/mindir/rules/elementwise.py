"""MINDIR rules for elementwise primitives: arithmetic (numpy broadcasting, as MindSpore's), activations,
reductions and Cast."""
from __future__ import annotations

import numpy as np

from converter.frontends.mindir.registry import ImportContext, mindir_op
from lite import dtypes
from schema import fb

A = fb.ActivationType
R = fb.ReduceMode

BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div", "Div": "Div", "Maximum": "Maximum",
          "Minimum": "Minimum", "Pow": "Pow", "Muls": "Mul", "Divs": "Div"}     # Muls, Divs: by a scalar
UNARY = {"Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log", "Neg": "Neg", "Abs": "Abs", "Erf": "Erf"}
# MindSpore primitive -> (our activation type, its fixed parameters)
ACTIVATIONS = {"ReLU": (A.RELU, {}), "ReLU6": (A.RELU6, {}), "Sigmoid": (A.SIGMOID, {}), "Tanh": (A.TANH, {}),
               "GeLU": (A.GELU_TANH, {}),          # MindSpore's GeLU is the tanh approximation
               "HSwish": (A.HSWISH, {}), "HSigmoid": (A.HSIGMOID, {"alpha": 1 / 6, "beta": 0.5}),
               "SiLU": (A.SWISH, {}), "Softplus": (A.SOFTPLUS, {}), "Mish": (A.MISH, {}),
               "SeLU": (A.SELU, {"alpha": 1.67326319217681884765625, "beta": 1.05070102214813232421875})}
REDUCTIONS = {"ReduceMean": R.MEAN, "ReduceSum": R.SUM, "ReduceMax": R.MAX, "ReduceMin": R.MIN,
              "ReduceProd": R.PROD}


@mindir_op(*BINARY)
def binary(ctx: ImportContext) -> None:
    ctx.emit(BINARY[ctx.op], [ctx.input(0), ctx.input(1)], [ctx.output])


@mindir_op(*UNARY)
def unary(ctx: ImportContext) -> None:
    ctx.emit(UNARY[ctx.op], [ctx.input(0)], [ctx.output])


@mindir_op("Square")
def square(ctx: ImportContext) -> None:
    ctx.emit("Mul", [ctx.input(0), ctx.input(0)], [ctx.output])


@mindir_op("Rsqrt")
def rsqrt(ctx: ImportContext) -> None:
    ctx.emit("UnaryMath", [ctx.emit1("Sqrt", [ctx.input(0)])], [ctx.output], mode=fb.UnaryMathMode.RECIPROCAL)


@mindir_op("AddN")
def add_n(ctx: ImportContext) -> None:
    """A left-to-right chain of Adds over the tuple input."""
    terms = ctx.tensors(0)
    acc = terms[0]
    for k, term in enumerate(terms[1:], 2):
        acc = ctx.emit1("Add", [acc, term], ctx.output if k == len(terms) else None)
    if len(terms) == 1:
        ctx.emit("Identity", [acc], [ctx.output])


@mindir_op(*ACTIVATIONS)
def activation(ctx: ImportContext) -> None:
    kind, params = ACTIVATIONS[ctx.op]
    ctx.emit("Activation", [ctx.input(0)], [ctx.output], type=kind, **params)


@mindir_op("Elu")
def elu(ctx: ImportContext) -> None:
    ctx.emit("Activation", [ctx.input(0)], [ctx.output], type=A.ELU, alpha=float(ctx.arg(1, "alpha", 1.0)))


@mindir_op(*REDUCTIONS)
def reduce(ctx: ImportContext) -> None:
    """Inputs x, axis (an int, a tuple; empty: every axis), keep_dims (input 2, or the attribute)."""
    x = ctx.input(0)
    axes = np.ravel(ctx.arg(1, "axis", ())).astype(np.int64)
    if axes.size == 0:
        axes = np.arange(ctx.value(x).rank, dtype=np.int64)
    ctx.emit("Reduce", [x, ctx.add_const(axes, "axes")], [ctx.output], mode=REDUCTIONS[ctx.op],
             keep_dims=bool(ctx.arg(2, "keep_dims", False)))


@mindir_op("Cast")
def cast(ctx: ImportContext) -> None:
    """The target type is a MindSpore TypeId (an int; 2.3 and later) or a tensor type (2.0)."""
    to = ctx.arg(1, "dst_type", None)
    dtype = _numpy_type(to)
    if dtype is None:
        raise ctx.error(f"cast to {to!r} is not supported")
    ctx.emit("Cast", [ctx.input(0)], [ctx.output], to=dtypes.from_numpy(dtype))


# MindSpore TypeIds (mindspore/core/ir/dtype/type_id.h) of the tensor types a Cast can target
TYPE_IDS = {30: np.bool_, 32: np.int8, 33: np.int16, 34: np.int32, 35: np.int64, 37: np.uint8, 38: np.uint16,
            39: np.uint32, 40: np.uint64, 42: np.float16, 43: np.float32, 44: np.float64}


def _numpy_type(to: object) -> np.dtype | None:
    if isinstance(to, np.dtype):        # a tensor type (MindSpore 2.0)
        return to
    return TYPE_IDS.get(to) if isinstance(to, int) else None
