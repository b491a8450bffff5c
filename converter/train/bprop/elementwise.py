"""bprop rules of the elementwise ops. Binary grads reduce over broadcast dims inside their kernels; an Add or Sub
input of the output's own shape takes the upstream gradient as is (no node)."""
from __future__ import annotations

from converter.train.bprop.rule import Bprop, Grads, bprop
from lite.kernels.einsum import parse as einsum_parse
from lite.status import NotSupportedError
from schema import fb


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


@bprop("Log", "Abs", "Erf")
def from_input(g: Bprop) -> Grads:
    """d log(x) = dy / x, d |x| = dy * sign(x), d erf(x) = dy * 2/sqrt(pi) exp(-x^2): computed from the input x."""
    return [g.grad(f"{g.node.op}Grad", [g.dy, g.node.inputs[0]], 0)]


@bprop("UnaryMath")
def unary_math(g: Bprop) -> Grads:
    """dy * f'(x) from the forward input x."""
    return [g.grad("UnaryMathGrad", [g.dy, g.node.inputs[0]], 0)]


@bprop("Where", wrt=(1, 2))
def where(g: Bprop) -> Grads:
    """dy goes to x where the condition holds, to y elsewhere; the condition gets none."""
    return g.grads("WhereGrad", [g.dy, *g.node.inputs], [1, 2])


@bprop("Cumulative", wrt=(0,))
def cumulative(g: Bprop) -> Grads:
    """The gradient of a running sum is the running sum of dy the other way round (same exclusivity); a running
    product's is CumProdGrad (exact at zeros)."""
    if g.node.attrs.get("mode", fb.CumulativeMode.SUM) == fb.CumulativeMode.PROD:
        return [g.grad("CumProdGrad", [g.dy, *g.node.inputs], 0)]
    return [g.grad("Cumulative", [g.dy, g.node.inputs[1]], 0, reverse=not g.node.attrs.get("reverse", False))]


@bprop("Det")
def det(g: Bprop) -> Grads:
    """dx = dy * the cofactor matrix of x."""
    return [g.grad("DetGrad", [g.dy, g.node.inputs[0]], 0)]


def _ellipsis_dims(term: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    pre, _, post = term.partition("...")
    return shape[len(pre):len(shape) - len(post)]


@bprop("Einsum")
def einsum(g: Bprop) -> Grads:
    """The gradient of operand k is the einsum of dy with the other operands into operand k's term. Refused
    where that is not a plain einsum: a label repeated within the term (a diagonal), a label of the term found
    in no other operand nor the output (a sum over one operand alone), or ellipsis dims broadcast in the term."""
    shapes = [g.value(x).shape for x in g.node.inputs]
    equation = einsum_parse(g.node.attrs["equation"], shapes)[0]      # with the implicit output made explicit
    lhs, _, rhs = equation.partition("->")
    terms = lhs.split(",")
    dy_shape = g.value(g.dy).shape
    grads: Grads = []
    for k, term in enumerate(terms):
        if not g.needs(k):
            grads.append(None)
            continue
        others = [t for i, t in enumerate(terms) if i != k]
        labels = term.replace("...", "")
        available = set(rhs + "".join(others))
        x = g.value(g.node.inputs[k])
        broadcast = "..." in term and _ellipsis_dims(rhs, dy_shape) != _ellipsis_dims(term, x.shape)
        if len(set(labels)) != len(labels) or not set(labels) <= available or broadcast:
            raise NotSupportedError(f"Einsum node '{g.prefix}': no gradient for operand {k} of '{equation}'")
        inputs = [g.dy, *(n for i, n in enumerate(g.node.inputs) if i != k)]
        grads.append(g.grad("Einsum", inputs, k, equation=f"{','.join([rhs, *others])}->{term}"))
    return grads
