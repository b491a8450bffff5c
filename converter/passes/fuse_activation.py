"""fuse_activation: x * sigmoid(x) -> SWISH, x * hsigmoid(x) and x * relu6(x + 3) / 6 -> HSWISH, then an
activation whose input has one reader folds into the op that produced it when that op applies an `activation` attribute
(`traits(op).fused_activation`: Conv2D, FullConnection, MatMul, Add, Sub, Mul, Div, Pooling, ...).
`split_activation` undoes the folding."""
from __future__ import annotations

from typing import Callable

from converter.ir import Graph, Node, Value
from converter.passes.match import is_scalar, other_input, produced_by
from lite.traits import traits
from schema import fb

A = fb.ActivationType
FUSABLE = (A.RELU, A.RELU6, A.SIGMOID, A.TANH, A.HSWISH, A.SWISH)
_HARD_SIGMOID = (1.0 / 6.0, 0.5)


def _gate_of(graph: Graph, mul: Node) -> tuple[str, int] | None:
    """(x, activation type) when `mul` computes x * gate(x) with a sigmoid or hard-sigmoid gate."""
    for a, b in (mul.inputs, mul.inputs[::-1]):
        gate = graph.producer(b)
        if gate is None or gate.op != "Activation" or gate.inputs[0] != a or graph.uses(b) != 1:
            continue
        kind = gate.attrs.get("type")
        if kind == A.SIGMOID:
            return a, A.SWISH
        if kind == A.HSIGMOID and all(abs(gate.attrs.get(k, 0) - v) < 1e-6
                                      for k, v in zip(("alpha", "beta"), _HARD_SIGMOID)):
            return a, A.HSWISH
    return None


def _hard_swish_of(graph: Graph, node: Node) -> str | None:
    """x when `node` computes x * relu6(x + 3) / 6 spelled out (a Div by 6 or Mul by 1/6 of Mul(x, relu6(Add(x,
    3)))), as PaddlePaddle's and older PyTorch exports write hard-swish; else None."""
    if node.attrs.get("activation", 0) or len(node.inputs) != 2:
        return None
    for product, sixth in [node.inputs, node.inputs[::-1]] if node.op == "Mul" else [node.inputs]:
        if not (is_scalar(graph, sixth, 6.0) if node.op == "Div" else is_scalar(graph, sixth, 1.0 / 6.0)):
            continue
        mul = produced_by(graph, product, "Mul")
        if mul is None or graph.uses(product) != 1 or len(set(mul.inputs)) != 2:
            continue
        for x, gate in (mul.inputs, mul.inputs[::-1]):
            relu6 = graph.producer(gate)
            if relu6 is None or graph.uses(gate) != 1:
                continue
            if relu6.op == "Activation" and relu6.attrs.get("type") == A.RELU6:    # Clip(0, 6) on its own
                shifted, add = relu6.inputs[0], graph.producer(relu6.inputs[0])
                fused = add is not None and not add.attrs.get("activation", 0) and graph.uses(shifted) == 1
            else:                                                                   # folded into the Add
                add, fused = relu6, relu6.attrs.get("activation", 0) == A.RELU6
            if (fused and add.op == "Add" and len(add.inputs) == 2 and x in add.inputs
                    and is_scalar(graph, other_input(add, x), 3.0)):
                return x
    return None


def fuse_gated(graph: Graph) -> None:
    for mul in graph.op_nodes("Mul"):
        if mul.attrs.get("activation", 0) or len(set(mul.inputs)) != 2:
            continue
        found = _gate_of(graph, mul)
        if found:
            x, kind = found
            mul.op, mul.inputs, mul.attrs = "Activation", [x], {"type": kind}
    for node in graph.op_nodes("Div", "Mul"):
        x = _hard_swish_of(graph, node)
        if x is not None:
            node.op, node.inputs, node.attrs = "Activation", [x], {"type": A.HSWISH}
    graph.prune()


def fuse_into_producer(graph: Graph) -> None:
    for act in graph.op_nodes("Activation"):
        kind = act.attrs.get("type")
        producer = graph.producer(act.inputs[0])
        if (kind not in FUSABLE or producer is None or not traits(producer.op).fused_activation
                or producer.attrs.get("activation", 0) or graph.uses(act.inputs[0]) != 1
                or act.inputs[0] in graph.outputs):
            continue
        producer.attrs["activation"] = kind
        graph.remove_node(act)
        out = act.outputs[0]
        graph.values.pop(out)
        graph.rename_value(producer.outputs[0], out)


def fuse_activation(graph: Graph) -> None:
    fuse_gated(graph)
    fuse_into_producer(graph)


def split_activation(graph: Graph, keep: Callable[[Node], bool] = lambda node: False) -> None:
    """Every activation fused into a node (but those `keep` keeps) becomes its own Activation node again, reading
    a fresh pre-activation value; the float meaning is unchanged. A graph to be trained runs this in place of
    fuse_activation (a fused activation has no gradient rule, nor a TFLite operator's fused one)."""
    for node in list(graph.nodes):
        kind = node.attrs.get("activation", 0)
        if node.op == "Activation" or not kind or keep(node):
            continue
        out = graph.values[node.outputs[0]]
        pre = graph.fresh(f"{out.name}_pre_activation")
        graph.values[pre] = Value(pre, out.shape, out.dtype, format=out.format)
        node.attrs = {**node.attrs, "activation": 0}
        graph.nodes.append(Node("Activation", graph.fresh(f"{node.name}/activation"), [pre], [out.name],
                                {"type": kind}))
        node.outputs = [pre, *node.outputs[1:]]
    graph.sort()
