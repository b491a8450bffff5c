"""fuse_gelu: the spelled-out GELU of exports before opset 20 becomes one Activation GELU / GELU_TANH.

Erf form (PyTorch's nn.GELU()): x * 0.5 * (1 + erf(x / sqrt(2))), the constant 0.5 on either factor or on the
product; the 1 / sqrt(2) as a Div or a Mul. Tanh form (nn.GELU(approximate='tanh')):
0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), 0.044715 * x^3 as any product of x, x, x
and the constant (Pow(x, 3) for x^3), as PyTorch and jax2tf write it.
Five to nine elementwise passes over the activation become one.
"""
from __future__ import annotations

import math

from converter.ir import Graph, Node
from converter.passes.match import is_scalar, only_reader, other_input, produced_by, scalar, scaled_by
from schema import fb

A = fb.ActivationType


def _erf_input(graph: Graph, erf: Node) -> str | None:
    """x when the Erf reads x / sqrt(2)."""
    scale = produced_by(graph, erf.inputs[0], "Mul", "Div")
    if scale is None or graph.uses(erf.inputs[0]) != 1:
        return None
    for x in scale.inputs[:2]:
        factor = scaled_by(graph, scale, x)
        if factor is not None and abs(factor - 1 / math.sqrt(2)) < 1e-4:
            return x
    return None


def _power_of(graph: Graph, value: str, x: str, depth: int = 0) -> tuple[int, float] | None:
    """(n, c) when `value` computes c * x^n as a tree of Muls of x, scalar constants and Pow(x, integer) in any
    order (x * x * x * 0.044715, ((0.044715 * x) * x) * x, ...), else None."""
    if value == x:
        return 1, 1.0
    c = scalar(graph, value)
    if c is not None:
        return 0, c
    node = produced_by(graph, value, "Mul", "Pow")
    if node is None or depth > 4:
        return None
    if node.op == "Pow":
        n = scalar(graph, node.inputs[1])
        return (int(n), 1.0) if node.inputs[0] == x and n is not None and n == int(n) else None
    factors = [_power_of(graph, i, x, depth + 1) for i in node.inputs[:2]]
    if None in factors:
        return None
    (n1, c1), (n2, c2) = factors
    return n1 + n2, c1 * c2


def _cube_sum(graph: Graph, value: str) -> str | None:
    """x when `value` = x + 0.044715 * x^3."""
    add = produced_by(graph, value, "Add")
    for x in add.inputs[:2] if add is not None else []:
        term = _power_of(graph, other_input(add, x), x)
        if term is not None and term[0] == 3 and abs(term[1] - 0.044715) <= 1e-4 * 0.044715:
            return x
    return None


def _const_of(graph: Graph, node: Node) -> str:
    """The constant input of a binary node (its second input when neither is constant)."""
    return next((i for i in node.inputs if graph.const(i) is not None), node.inputs[1])


def _tanh_input(graph: Graph, tanh: Node) -> str | None:
    """x when the tanh reads sqrt(2 / pi) * (x + 0.044715 x^3)."""
    scale = produced_by(graph, tanh.inputs[0], "Mul")
    if scale is None or graph.uses(tanh.inputs[0]) != 1:
        return None
    inner = other_input(scale, _const_of(graph, scale))
    if not is_scalar(graph, _const_of(graph, scale), math.sqrt(2 / math.pi)):
        return None
    return _cube_sum(graph, inner)


def _gelu_output(graph: Graph, x: str, gate: Node) -> str | None:
    """The value computing x * 0.5 * (1 + gate), the 0.5 on any factor, reading gate's output `gate.outputs[0]`."""
    one = only_reader(graph, gate.outputs[0], "Add")
    if one is None or not is_scalar(graph, other_input(one, gate.outputs[0]), 1.0):
        return None
    product = only_reader(graph, one.outputs[0], "Mul")
    if product is None or product.attrs.get("activation", 0):
        return None
    factor = other_input(product, one.outputs[0])
    if factor == x:                                          # (x * (1 + g)) * 0.5
        half = only_reader(graph, product.outputs[0], "Mul")
        return half.outputs[0] if half is not None and _halves(graph, half, product.outputs[0]) else None
    if is_scalar(graph, factor, 0.5):                        # x * ((1 + g) * 0.5)
        outer = only_reader(graph, product.outputs[0], "Mul")
        return outer.outputs[0] if outer is not None and other_input(outer, product.outputs[0]) == x else None
    halved = produced_by(graph, factor, "Mul")              # (x * 0.5) * (1 + g)
    if halved is not None and x in halved.inputs and _halves(graph, halved, x):
        return product.outputs[0]
    return None


def _halves(graph: Graph, node: Node, value: str) -> bool:
    return scaled_by(graph, node, value) == 0.5


def fuse_gelu(graph: Graph) -> None:
    for node in list(graph.nodes):
        if node.op == "Erf":
            x, kind = _erf_input(graph, node), A.GELU
        elif node.op == "Activation" and node.attrs.get("type") == A.TANH:
            x, kind = _tanh_input(graph, node), A.GELU_TANH
        else:
            continue
        output = _gelu_output(graph, x, node) if x is not None else None
        if output is not None:
            last = graph.producer(output)
            last.op, last.inputs, last.attrs = "Activation", [x], {"type": kind}
    graph.prune()
