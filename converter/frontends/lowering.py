"""Lowerings that more than one frontend needs: a source op spelled out of our ops, written once."""
from __future__ import annotations

import math

import numpy as np

from converter.frontends.emit import EmitContext
from schema import fb


def gelu_tanh(ctx: EmitContext, x: str, outputs: list[str]) -> None:
    """GELU's tanh approximation, x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))), which ONNX's Gelu
    (approximate='tanh') and TFLite's GELU (approximate) ask for; the exact GELU is our Activation."""

    def scalar(value: float) -> str:
        return ctx.add_const(np.array(value, ctx.value(x).dtype))

    cube = ctx.emit1("Mul", [ctx.emit1("Mul", [x, x]), x])
    inner = ctx.emit1("Add", [x, ctx.emit1("Mul", [cube, scalar(0.044715)])])
    tanh = ctx.emit1("Activation", [ctx.emit1("Mul", [inner, scalar(math.sqrt(2.0 / math.pi))])],
                     type=fb.ActivationType.TANH)
    ctx.emit("Mul", [ctx.emit1("Mul", [x, scalar(0.5)]), ctx.emit1("Add", [tanh, scalar(1.0)])], outputs)
