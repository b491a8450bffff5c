"""sink_squeeze: Squeeze(x) followed by an Add, Sub, Mul or Div with a constant becomes that op on x (the constant
given x's size-1 dims) followed by the Squeeze. The values are the same; the op now reads the producer of x
directly, so a conv's bias or scale after the Squeeze of a Conv1D export (Conv, Squeeze, Add(bias)) folds into the
conv (`fuse_affine`) instead of costing a pass over its output.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.match import only_reader, other_input

BINARY = ("Add", "Sub", "Mul", "Div")


def _sink(graph: Graph, squeeze: Node) -> bool:
    axes = graph.const(squeeze.inputs[1]) if len(squeeze.inputs) > 1 and squeeze.inputs[1] else None
    x, y = squeeze.inputs[0], squeeze.outputs[0]
    op = only_reader(graph, y, *BINARY) if axes is not None else None
    if op is None or op.inputs.count(y) != 1 or graph.values[x].dynamic:
        return False
    constant, out = graph.const(other_input(op, y)), graph.values[op.outputs[0]]
    shape = graph.values[y].shape
    if (constant is None or constant.ndim > len(shape) or out.shape != shape or any(
            graph.values[v].quant_params for v in (x, y, op.outputs[0]))):
        return False
    rank = graph.values[x].rank
    full = constant.reshape((1,) * (len(shape) - constant.ndim) + constant.shape)
    widened = graph.add_const(np.expand_dims(full, sorted(int(a) % rank for a in axes.ravel())),
                              f"{op.name}/unsqueezed")
    inner = graph.fresh(f"{op.name}/unsqueezed_out")
    graph.values[inner] = Value(inner, graph.values[x].shape, out.dtype, format=graph.values[x].format)
    op.inputs = [x if i == y else widened for i in op.inputs]
    squeeze.inputs[0], squeeze.outputs, op.outputs = inner, [op.outputs[0]], [inner]
    graph.values.pop(y)
    return True


def sink_squeeze(graph: Graph) -> None:
    if any([_sink(graph, squeeze) for squeeze in graph.op_nodes("Squeeze")]):
        graph.sort()
    graph.prune()
