"""fuse_layer_norm: the LayerNormalization of exports before opset 17 becomes one LayerNorm.

    mean = ReduceMean(x, axes); d = x - mean; var = ReduceMean(d^2, axes)   (d^2 as Pow(d, 2) or d * d)
    y = d / Sqrt(var + eps) [* scale] [+ bias]

over trailing axes. Nine whole-tensor passes (and their temporaries) become one kernel with one pass for the
statistics, and a training graph gets LayerNormGrad instead of nine gradient nodes.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.passes.match import is_scalar, only_reader, other_input, produced_by, scalar, trailing_axes
from schema import fb


def _mean_axis(graph: Graph, node: Node | None, rank: int) -> int | None:
    """The first axis of a keep-dims mean over trailing axes, else None."""
    if node is None or node.op != "Reduce" or node.attrs.get("mode") != fb.ReduceMode.MEAN \
            or not node.attrs.get("keep_dims", True) or len(node.inputs) < 2:
        return None
    return trailing_axes(graph.const(node.inputs[1]), rank)


def _is_square(graph: Graph, node: Node | None, d: str) -> bool:
    if node is None:
        return False
    if node.op == "Pow":
        return node.inputs[0] == d and is_scalar(graph, node.inputs[1], 2.0)
    return node.op == "Mul" and node.inputs == [d, d] and not node.attrs.get("activation", 0)


def _affine(graph: Graph, value: str, inner: tuple[int, ...], op: str) -> tuple[str, str] | None:
    """(parameter, output) when `value`'s only reader is `op` with a constant of the normalised shape (or one
    broadcasting to it) that leaves the shape unchanged."""
    node = only_reader(graph, value, op)
    if node is None or node.attrs.get("activation", 0):
        return None
    param = other_input(node, value)
    const = graph.const(param)
    if const is None or const.ndim > len(inner) or np.broadcast_shapes(const.shape, inner) != inner:
        return None
    return param, node.outputs[0]


def _fuse_one(graph: Graph, mean: Node) -> bool:
    x = mean.inputs[0]
    rank = graph.values[x].rank
    axis = _mean_axis(graph, mean, rank)
    sub = only_reader(graph, mean.outputs[0], "Sub")
    if axis is None or sub is None or sub.inputs != [x, mean.outputs[0]] or sub.attrs.get("activation", 0):
        return False
    d = sub.outputs[0]
    readers = graph.consumers(d)
    square = next((n for n in readers if _is_square(graph, n, d)), None)
    div = next((n for n in readers if n.op == "Div" and n.inputs[0] == d), None)
    if square is None or div is None or len(readers) != 2 or graph.uses(d) != 2 + (square.op == "Mul"):
        return False
    var = only_reader(graph, square.outputs[0], "Reduce")
    if var is None or _mean_axis(graph, var, rank) != axis:
        return False
    add = only_reader(graph, var.outputs[0], "Add")
    eps = scalar(graph, other_input(add, var.outputs[0])) if add is not None else None
    sqrt = only_reader(graph, add.outputs[0], "Sqrt") if eps is not None else None
    if sqrt is None or div.inputs[1] != sqrt.outputs[0] or graph.uses(sqrt.outputs[0]) != 1 \
            or div.attrs.get("activation", 0):
        return False
    inner = graph.values[x].shape[axis:]
    if min(inner, default=0) < 0:
        return False
    output, inputs = div.outputs[0], [x]
    scaled = _affine(graph, output, inner, "Mul")
    if scaled is not None:
        inputs.append(scaled[0])
        output = scaled[1]
    else:
        inputs.append(graph.add_const(np.ones(inner, graph.values[x].dtype), f"{mean.name}/scale"))
    shifted = _affine(graph, output, inner, "Add")
    if shifted is not None:
        inputs.append(shifted[0])
        output = shifted[1]
    last = graph.producer(output)
    last.op, last.inputs, last.attrs = "LayerNorm", inputs, {"axis": axis, "epsilon": eps}
    return True


def fuse_layer_norm(graph: Graph) -> None:
    for mean in graph.op_nodes("Reduce"):
        if mean in graph.nodes:
            _fuse_one(graph, mean)
    graph.prune()
