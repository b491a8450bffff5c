"""remove_identity: drop nodes that return their input unchanged (Identity, inference Dropout, no-op Cast,
Reshape/Flatten/Squeeze to the same static shape, Transpose by the identity permutation)."""
from __future__ import annotations

from converter.ir import Graph, Node

_SHAPE_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


def _is_noop(graph: Graph, node: Node) -> bool:
    x, y = graph.values[node.inputs[0]], graph.values[node.outputs[0]]
    if node.op in ("Identity", "Dropout"):
        return True
    if node.op == "Cast":
        return x.dtype == y.dtype
    if node.op == "Transpose":
        return list(node.attrs.get("perm", [])) == list(range(x.rank))
    if node.op in _SHAPE_OPS:
        return x.static and x.shape == y.shape
    return False


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


def remove_identity(graph: Graph, keep: tuple[str, ...] = ()) -> None:
    """Bypass every no-op node except those of the ops in `keep` (training keeps Dropout)."""
    for node in list(graph.nodes):
        if (node.op in ("Identity", "Dropout", "Cast", "Transpose", *_SHAPE_OPS) and node.op not in keep
                and len(node.outputs) == 1 and _is_noop(graph, node)):
            bypass(graph, node)
