"""MINDIR rules for elementwise primitives: arithmetic and comparisons (numpy broadcasting, as MindSpore's),
logic, activations, reductions and Cast."""
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
              "ReduceProd": R.PROD,
              "SumExt": R.SUM, "MeanExt": R.MEAN, "ProdExt": R.PROD}    # *Ext: x, dim, keepdim, dtype
C, B = fb.CompareMode, fb.BitwiseMode
COMPARISONS = {"Equal": C.EQUAL, "Greater": C.GREATER, "GreaterEqual": C.GREATER_EQUAL, "Less": C.LESS,
               "LessEqual": C.LESS_EQUAL, "LessScalar": C.LESS, "GreaterScalar": C.GREATER, "EqScalar": C.EQUAL}
LOGIC = {"LogicalAnd": B.AND, "LogicalOr": B.OR, "LogicalNot": B.NOT}


@mindir_op(*BINARY)
def binary(ctx: ImportContext) -> None:
    ctx.emit(BINARY[ctx.op], ctx.operands(), [ctx.output])


@mindir_op(*COMPARISONS)
def compare(ctx: ImportContext) -> None:
    ctx.emit("Compare", ctx.operands(), [ctx.output], mode=COMPARISONS[ctx.op])


@mindir_op(*LOGIC)
def logic(ctx: ImportContext) -> None:
    mode = LOGIC[ctx.op]
    ctx.emit("Bitwise", [ctx.input(k) for k in range(1 if mode == B.NOT else 2)], [ctx.output], mode=mode)


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


@mindir_op("ClampScalar")
def clamp(ctx: ImportContext) -> None:
    """Inputs x, min, max (None: unbounded): our HARD_TANH."""
    low, high = ctx.arg(1, "min", None), ctx.arg(2, "max", None)
    ctx.emit("Activation", [ctx.input(0)], [ctx.output], type=A.HARD_TANH,
             min_val=-np.inf if low is None else float(low), max_val=np.inf if high is None else float(high))


@mindir_op("Elu")
def elu(ctx: ImportContext) -> None:
    ctx.emit("Activation", [ctx.input(0)], [ctx.output], type=A.ELU, alpha=float(ctx.arg(1, "alpha", 1.0)))


@mindir_op(*REDUCTIONS)
def reduce(ctx: ImportContext) -> None:
    """Inputs x, axis (an int, a tuple; empty or None: every axis), keep_dims (input 2, or the attribute) and, for
    SumExt/MeanExt, a result dtype (only None: the input's)."""
    x = ctx.input(0)
    if ctx.op.endswith("Ext") and ctx.arg(3, "dtype", None) is not None:
        raise ctx.error("a result dtype other than the input's is not supported")
    axis = ctx.arg(1, "axis", ())
    axes = np.ravel(np.asarray(() if axis is None else axis, np.int64))
    if axes.size == 0:
        axes = np.arange(ctx.value(x).rank, dtype=np.int64)
    ctx.emit("Reduce", [x, ctx.add_const(axes, "axes")], [ctx.output], mode=REDUCTIONS[ctx.op],
             keep_dims=bool(ctx.arg(2, "keep_dims", False)))


@mindir_op("Cast")
def cast(ctx: ImportContext) -> None:
    """The target type is a MindSpore TypeId (an int; 2.3 and later) or a tensor type (2.0)."""
    to = ctx.arg(1, "dst_type", None)
    dtype = numpy_type(to)
    if dtype is None:
        raise ctx.error(f"cast to {to!r} is not supported")
    ctx.emit("Cast", [ctx.input(0)], [ctx.output], to=dtypes.from_numpy(dtype))


# MindSpore TypeIds (mindspore/core/ir/dtype/type_id.h) of the tensor types a Cast can target
TYPE_IDS = {30: np.bool_, 32: np.int8, 33: np.int16, 34: np.int32, 35: np.int64, 37: np.uint8, 38: np.uint16,
            39: np.uint32, 40: np.uint64, 42: np.float16, 43: np.float32, 44: np.float64}


def numpy_type(to: object) -> np.dtype | None:
    """A MindSpore tensor type, given as a TypeId or as the type itself, as a numpy dtype (None: not one)."""
    if isinstance(to, np.dtype):        # a tensor type (MindSpore 2.0)
        return to
    return TYPE_IDS.get(to) if isinstance(to, int) else None
