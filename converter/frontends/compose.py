"""Ops that several frontends spell out of our canonical ops (each frontend's rule decides when to use them)."""
from __future__ import annotations

import math

import numpy as np

from converter.frontends.emit import EmitContext
from schema import fb


def tanh_gelu(ctx: EmitContext, x: str, output: str) -> None:
    """GELU's tanh approximation: x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))."""
    def scalar(value: float) -> str:
        return ctx.add_const(np.array(value, ctx.value(x).dtype))

    cube = ctx.emit1("Mul", [ctx.emit1("Mul", [x, x]), x])
    inner = ctx.emit1("Add", [x, ctx.emit1("Mul", [cube, scalar(0.044715)])])
    tanh = ctx.emit1("Activation", [ctx.emit1("Mul", [inner, scalar(math.sqrt(2.0 / math.pi))])],
                     type=fb.ActivationType.TANH)
    ctx.emit("Mul", [ctx.emit1("Mul", [x, scalar(0.5)]), ctx.emit1("Add", [tanh, scalar(1.0)])], [output])
