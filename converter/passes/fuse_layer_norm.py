"""fuse_layer_norm: the LayerNormalization of exports before opset 17 becomes one LayerNorm.

    mean = ReduceMean(x, axes); d = x - mean; var = ReduceMean(d^2, axes)   (d^2 as Pow(d, 2) or d * d)
    y = d / Sqrt(var + eps) [* scale] [+ bias]

over trailing axes. Nine whole-tensor passes (and their temporaries) become one kernel with one pass for the
statistics, and a training graph gets LayerNormGrad instead of nine gradient nodes. Also the moments form of
flax's LayerNorm as jax2tf writes it (magika's: 16 nodes), the mean a sum times 1 / n and the keep-dims shape
restored by Reshape / Expand:

    mean = Sum(x) / n; var = max(Sum(x * x) / n - mean^2, 0)
    y = (x - mean) * (1 / Sqrt(var + eps) [* scale]) [+ bias]

whose variance the kernel takes as the mean of the squared deviations (no cancellation when mean^2 >> var).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.passes.match import (is_scalar, only_reader, other_input, produced_by, reduced_view, scalar,
                                    scaled_by, trailing_axes)
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


def _moment(graph: Graph, value: str, rank: int) -> tuple[str, int] | None:
    """(x, axis) when `value` = Sum(x over its trailing axes [axis, rank)) times 1 / n (or divided by n)."""
    scale = produced_by(graph, value, "Mul", "Div")
    for total in scale.inputs[:2] if scale is not None else []:
        reduce = produced_by(graph, total, "Reduce")
        factor = scaled_by(graph, scale, total)
        if reduce is None or reduce.attrs.get("mode") != fb.ReduceMode.SUM or len(reduce.inputs) < 2 \
                or factor is None:
            continue
        x = reduce.inputs[0]
        axis = trailing_axes(graph.const(reduce.inputs[1]), rank) if graph.values[x].rank == rank else None
        inner = graph.values[x].shape[axis:] if axis is not None else (-1,)
        if min(inner, default=-1) > 0 and abs(factor * int(np.prod(inner)) - 1) < 1e-6:
            return x, axis
    return None


def _moments_variance(graph: Graph, value: str, x: str, mean: str, axis: int) -> bool:
    """Whether `value` is [max(0,] Sum(x * x) / n - mean * mean[)] over the same axes as `mean`."""
    clamp = produced_by(graph, value, "Maximum")
    if clamp is not None:
        if not is_scalar(graph, clamp.inputs[0], 0.0) and not is_scalar(graph, clamp.inputs[1], 0.0):
            return False
        value = next(i for i in clamp.inputs if graph.const(i) is None)
    sub = produced_by(graph, value, "Sub")
    square_of_mean = produced_by(graph, sub.inputs[1], "Mul") if sub is not None else None
    if square_of_mean is None or square_of_mean.inputs != [mean, mean]:
        return False
    second = _moment(graph, sub.inputs[0], graph.values[x].rank)
    square = produced_by(graph, second[0], "Mul") if second is not None else None
    return square is not None and square.inputs == [x, x] and second[1] == axis


def _inner_param(graph: Graph, name: str, inner: tuple[int, ...]) -> str | None:
    """A constant broadcasting to the normalised shape `inner` as one of at most len(inner) dims, else None."""
    const = graph.const(name)
    if const is None:
        return None
    while const.ndim > len(inner) and const.shape[0] == 1:
        const = const[0]
    if const.ndim > len(inner) or np.broadcast_shapes(const.shape, inner) != inner:
        return None
    return graph.add_const(np.ascontiguousarray(const), f"{name}/layer_norm")


def _fuse_moments(graph: Graph, sub: Node) -> bool:
    """The moments form, from its `x - mean`."""
    x, mean_b = sub.inputs[:2]
    shape = graph.values[x].shape
    product = only_reader(graph, sub.outputs[0], "Mul")
    if product is None or sub.attrs.get("activation", 0) or product.attrs.get("activation", 0):
        return False
    for axis in range(len(shape) - 1, -1, -1):          # the trailing axes whose mean mean_b holds
        mean = reduced_view(graph, mean_b, shape, list(range(axis, len(shape))))
        if mean is not None and _moment(graph, mean, len(shape)) == (x, axis):
            break
    else:
        return False
    inner = shape[axis:]
    factor = other_input(product, sub.outputs[0])
    scaled = produced_by(graph, factor, "Mul")
    scale = None
    if scaled is not None and any(graph.const(i) is not None for i in scaled.inputs):
        scale = next(i for i in scaled.inputs if graph.const(i) is not None)
        factor = other_input(scaled, scale)
        scale = _inner_param(graph, scale, inner)
        if scale is None:
            return False
    reciprocal = produced_by(graph, factor, "UnaryMath")
    if reciprocal is None or reciprocal.attrs.get("mode") != fb.UnaryMathMode.RECIPROCAL:
        return False
    sqrt = produced_by(graph, reciprocal.inputs[0], "Sqrt")
    add = produced_by(graph, sqrt.inputs[0], "Add") if sqrt is not None else None
    eps = next((scalar(graph, i) for i in add.inputs if scalar(graph, i) is not None), None) if add else None
    var = reduced_view(graph, other_input(add, next(i for i in add.inputs if scalar(graph, i) is not None)), shape,
                       list(range(axis, len(shape)))) if eps is not None else None
    if var is None or not _moments_variance(graph, var, x, mean, axis):
        return False
    inputs, output = [x, scale or graph.add_const(np.ones(inner, graph.values[x].dtype), f"{sub.name}/scale")], \
        product.outputs[0]
    shift = only_reader(graph, output, "Add")
    bias = _inner_param(graph, other_input(shift, output), inner) if shift is not None \
        and not shift.attrs.get("activation", 0) else None
    if bias is not None and graph.values[shift.outputs[0]].shape == graph.values[output].shape:
        inputs.append(bias)
        output = shift.outputs[0]
    if graph.values[output].shape != graph.values[x].shape:
        return False
    last = graph.producer(output)
    last.op, last.inputs, last.attrs = "LayerNorm", inputs, {"axis": axis, "epsilon": eps}
    return True


def fuse_layer_norm(graph: Graph) -> None:
    for mean in graph.op_nodes("Reduce"):
        if mean in graph.nodes:
            _fuse_one(graph, mean)
    for sub in graph.op_nodes("Sub"):
        if sub in graph.nodes:
            _fuse_moments(graph, sub)
    graph.prune()
