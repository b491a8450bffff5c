"""Small pattern-matching helpers of the fusion passes: walking single-use chains and reading scalar constants."""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node


def scalar(graph: Graph, name: str) -> float | None:
    """The value of a constant holding one number (any rank), else None."""
    value = graph.const(name)
    return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def is_scalar(graph: Graph, name: str, expected: float, rtol: float = 1e-4) -> bool:
    value = scalar(graph, name)
    return value is not None and abs(value - expected) <= rtol * abs(expected)


def only_reader(graph: Graph, value: str, *ops: str) -> Node | None:
    """The single node reading `value` when it is one of `ops` and `value` is not a graph output, else None."""
    readers = graph.consumers(value)
    if len(readers) != 1 or graph.uses(value) != 1 or readers[0].op not in ops:
        return None
    return readers[0]


def produced_by(graph: Graph, value: str, *ops: str) -> Node | None:
    """The node computing `value` when it is one of `ops` (with no fused activation), else None."""
    node = graph.producer(value)
    return node if node is not None and node.op in ops and not node.attrs.get("activation", 0) else None


def other_input(node: Node, value: str) -> str:
    """The input of a binary node that is not `value`."""
    a, b = node.inputs[:2]
    return b if a == value else a


def scaled_by(graph: Graph, node: Node, value: str) -> float | None:
    """The factor a Mul or Div node multiplies `value` by when its other input is a scalar constant
    (Div only as value / c), else None."""
    other = other_input(node, value)
    c = scalar(graph, other)
    if c is None or node.attrs.get("activation", 0) or node.inputs.count(value) != 1:
        return None
    if node.op == "Mul":
        return c
    return 1.0 / c if node.op == "Div" and node.inputs[0] == value and c != 0 else None


def trailing_axes(axes: np.ndarray | None, rank: int) -> int | None:
    """The first axis when `axes` are exactly the trailing axes [k, rank) of a rank-`rank` tensor, else None."""
    if axes is None or axes.size == 0:
        return None
    normal = sorted(int(a) % rank for a in axes.reshape(-1))
    return normal[0] if normal == list(range(normal[0], rank)) else None


def reduced_view(graph: Graph, value: str, shape: tuple[int, ...], axes: list[int]) -> str | None:
    """What `value` is a view of when it holds a reduction of a `shape` tensor over `axes` with those dims kept as
    1s (its shape, padded with leading 1s, is `shape` with `axes` set to 1): itself, or the reduction's result
    before the Reshapes, Expands and Unsqueezes that only restored the size-1 dims; else None."""
    v = graph.values[value]
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
    if v.dynamic or v.rank > len(shape) or (1,) * (len(shape) - v.rank) + tuple(v.shape) != kept:
        return None
    node = graph.producer(value)
    while node is not None and node.op in ("Reshape", "Expand", "Unsqueeze") and not node.attrs.get("activation"):
        source = node.inputs[0]
        if [d for d in graph.values[source].shape if d != 1] != [d for d in kept if d != 1]:
            break
        value, node = source, graph.producer(source)
    return value
