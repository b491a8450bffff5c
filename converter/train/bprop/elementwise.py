"""bprop rules of the elementwise ops. Binary grads reduce over broadcast dims inside their kernels; an Add or Sub
input of the output's own shape takes the upstream gradient as is (no node)."""
from __future__ import annotations

from converter.train.bprop.rule import Bprop, Grads, bprop


def _unbroadcast(g: Bprop, i: int) -> bool:
    """Whether input i has the output's shape, so its gradient needs no reduction."""
    return g.value(g.node.inputs[i]).shape == g.value(g.node.outputs[0]).shape


@bprop("Add")
def add(g: Bprop) -> Grads:
    if all(_unbroadcast(g, i) for i in (0, 1)):
        return [g.dy, g.dy]
    return g.grads("AddGrad", [g.dy, *g.node.inputs], [0, 1])


@bprop("Sub")
def sub(g: Bprop) -> Grads:
    if all(_unbroadcast(g, i) for i in (0, 1)):
        return [g.dy, g.grad("Neg", [g.dy], 1)]
    return g.grads("SubGrad", [g.dy, *g.node.inputs], [0, 1])


@bprop("Mul", "Div", "Pow", "Maximum", "Minimum")
def binary(g: Bprop) -> Grads:
    """dy, a, b -> da, db with the op's own grad kernel (MulGrad, DivGrad, ...)."""
    return g.grads(f"{g.node.op}Grad", [g.dy, *g.node.inputs], [0, 1])


@bprop("Neg")
def neg(g: Bprop) -> Grads:
    return [g.grad("NegGrad", [g.dy], 0)]


@bprop("Sqrt", "Exp")
def from_output(g: Bprop) -> Grads:
    """d sqrt(x) = dy / (2 y), d exp(x) = dy * y: computed from the output y."""
    return [g.grad(f"{g.node.op}Grad", [g.dy, g.node.outputs[0]], 0)]


@bprop("Log", "Abs")
def from_input(g: Bprop) -> Grads:
    """d log(x) = dy / x, d |x| = dy * sign(x): computed from the input x."""
    return [g.grad(f"{g.node.op}Grad", [g.dy, g.node.inputs[0]], 0)]
