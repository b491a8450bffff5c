"""fuse_softmax: the softmax that TensorFlow and jax2tf exports spell out becomes one Softmax node.

    m = ReduceMax(x, axis) [then Max(m, -inf)]; e = Exp(x - m); y = e / ReduceSum(e, axis)

the reductions' dims kept or restored by Reshape / Expand. Seven to ten small ops (each one more pass and, on a
small tensor, one more step of the run loop) become one, which subtracts the maximum itself.
"""
from __future__ import annotations

from converter.ir import Graph, Node
from converter.passes.match import produced_by, reduced_view, scalar
from schema import fb


def _reduces(graph: Graph, value: str, x: str, mode: int, axis: int) -> bool:
    """Whether `value` is a Reduce of `mode` over `x`'s axis `axis` alone."""
    reduce = produced_by(graph, value, "Reduce")
    if reduce is None or reduce.attrs.get("mode") != mode or reduce.inputs[0] != x or len(reduce.inputs) < 2:
        return False
    axes = graph.const(reduce.inputs[1])
    return axes is not None and axes.size == 1 and int(axes.reshape(-1)[0]) % graph.values[x].rank == axis


def _axis(graph: Graph, value: str, x: str, mode: int) -> int | None:
    """The axis when `value` is x's reduction of `mode` over it, dims kept or restored (a maximum possibly floored
    at -inf first: jax's guard), else None."""
    shape = graph.values[x].shape
    for axis in range(len(shape)):
        source = reduced_view(graph, value, shape, [axis])
        floor = produced_by(graph, source, "Maximum") if source is not None else None
        if floor is not None and mode == fb.ReduceMode.MAX and any(scalar(graph, i) == float("-inf")
                                                                   for i in floor.inputs):
            source = next(i for i in floor.inputs if graph.const(i) is None)
        if source is not None and _reduces(graph, source, x, mode, axis):
            return axis
    return None


def _fuse_one(graph: Graph, div: Node) -> bool:
    e, total = div.inputs[:2]
    exp = produced_by(graph, e, "Exp")
    sub = produced_by(graph, exp.inputs[0], "Sub") if exp is not None else None
    if sub is None or div.attrs.get("activation", 0) or graph.uses(exp.inputs[0]) != 1 or graph.uses(e) != 2:
        return False
    x = sub.inputs[0]
    axis = _axis(graph, sub.inputs[1], x, fb.ReduceMode.MAX)
    if axis is None or _axis(graph, total, e, fb.ReduceMode.SUM) != axis \
            or graph.values[div.outputs[0]].shape != graph.values[x].shape:
        return False
    div.op, div.inputs, div.attrs = "Softmax", [x], {"axis": axis}
    return True


def fuse_softmax(graph: Graph) -> None:
    for div in graph.op_nodes("Div"):
        _fuse_one(graph, div)
    graph.prune()
