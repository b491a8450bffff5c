"""remove_identity: drop nodes that return their input unchanged, as each op's `traits(op).noop` says (Identity,
inference Dropout, no-op Cast, Reshape/Flatten/Squeeze to the same static shape, Transpose by the identity
permutation, Slice keeping every element)."""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from lite.rewrites import returns_input
from lite.traits import SAME_SHAPE, traits


def _is_full_slice(graph: Graph, node: Node) -> bool:
    """A Slice keeping every element: equal static shapes and forward steps (a backward one reverses)."""
    x, y = graph.values[node.inputs[0]], graph.values[node.outputs[0]]
    steps = graph.const(node.inputs[4]) if len(node.inputs) > 4 and node.inputs[4] else np.ones(1)
    return (not (x.dynamic or y.dynamic) and steps is not None and bool((steps > 0).all())
            and all(d >= 0 for d in x.shape) and tuple(x.shape) == tuple(y.shape) and x.dtype == y.dtype)


def _is_noop(graph: Graph, node: Node) -> bool:
    if node.op == "Slice" and len(node.outputs) == 1:
        return _is_full_slice(graph, node)
    if len(node.outputs) != 1 or not node.inputs or traits(node.op).noop is None:
        return False    # (also: an op whose first input is an omitted optional one, a Loop without a trip count)
    x, y = graph.values[node.inputs[0]], graph.values[node.outputs[0]]
    if (x.dynamic or y.dynamic) and traits(node.op).noop == SAME_SHAPE:
        return False    # shapes known only at run time (their rank may be a fallback, not the truth)
    return returns_input(node.op, node.attrs.get("training", False), node.attrs.get("perm"),
                         (x.shape, x.dtype), (y.shape, y.dtype))


def bypass(graph: Graph, node: Node) -> bool:
    """Remove a one-in one-out node whose output equals its input; False when names forbid it (a graph
    output that is also a graph input stays as is)."""
    src, dst = node.inputs[0], node.outputs[0]
    if dst in graph.outputs:
        if src in graph.inputs or src in graph.outputs or graph.values[src].const is not None \
                or graph.uses(src) > 1:
            return False
        graph.remove_node(node)
        graph.values.pop(dst)
        graph.rename_value(src, dst)
        return True
    graph.remove_node(node)
    graph.replace_uses(dst, src)
    graph.values.pop(dst, None)
    return True


def remove_identity(graph: Graph, training: bool = False) -> None:
    """Bypass every no-op node; for a graph to be trained, not those with a train-mode form (Dropout)."""
    for node in list(graph.nodes):
        if _is_noop(graph, node) and not (training and traits(node.op).train):
            bypass(graph, node)
