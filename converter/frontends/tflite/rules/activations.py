"""TFLite importer rules for activations: RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1, LOGISTIC, TANH, HARD_SWISH,
ELU, LEAKY_RELU, GELU -> our Activation{type} (int8 tensors run as the int8 Activation's lookup table);
PRELU -> PReLU."""
from __future__ import annotations

from converter.frontends.tflite.registry import ImportContext, tflite_op
from schema import fb

A = fb.ActivationType

# builtin -> (our activation type, fixed attributes)
_ACTIVATIONS: dict[str, tuple[int, dict[str, float]]] = {
    "RELU": (A.RELU, {}),
    "RELU6": (A.RELU6, {}),
    "RELU_N1_TO_1": (A.HARD_TANH, {"min_val": -1.0, "max_val": 1.0}),
    "RELU_0_TO_1": (A.HARD_TANH, {"min_val": 0.0, "max_val": 1.0}),
    "LOGISTIC": (A.SIGMOID, {}),
    "TANH": (A.TANH, {}),
    "HARD_SWISH": (A.HSWISH, {}),
    "ELU": (A.ELU, {"alpha": 1.0}),
}


@tflite_op(*_ACTIVATIONS, quant="int8")
def activation(ctx: ImportContext) -> None:
    kind, attrs = _ACTIVATIONS[ctx.op.op]
    ctx.emit("Activation", [ctx.input(0)], ctx.outputs, type=kind, **attrs)


@tflite_op("LEAKY_RELU", quant="int8")
def leaky_relu(ctx: ImportContext) -> None:
    ctx.emit("Activation", [ctx.input(0)], ctx.outputs, type=A.LEAKY_RELU, alpha=float(ctx.opt("Alpha", 0.2)))


@tflite_op("GELU", quant="int8")
def gelu(ctx: ImportContext) -> None:
    """Exact GELU, or its tanh approximation (`approximate`)."""
    ctx.emit("Activation", [ctx.input(0)], ctx.outputs, type=A.GELU_TANH if ctx.opt("Approximate", False) else A.GELU)


@tflite_op("PRELU")
def prelu(ctx: ImportContext) -> None:
    ctx.emit("PReLU", [ctx.input(0), ctx.input(1)], ctx.outputs)
