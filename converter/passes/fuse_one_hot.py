"""fuse_one_hot: a one-hot encoding multiplied by a weight matrix becomes a row lookup.

    Equal(x, arange(N)) -> Cast(float) -> FullConnection(W [D, N], b)   (x an integer tensor [..., 1])

is x's row of the table W^T + b, or b where x is outside [0, N) (a row of zeros). JAX and Keras exports write
embeddings so: magika's byte embedding builds a [2048, 257] one-hot and multiplies it out. It becomes

    Gather(table [N + 1, D], Minimum(Cast(x, uint64), N), axis 0) -> Squeeze(axis -2)

whose last row is b, reached by every index outside [0, N) (a negative one wraps past N as uint64). The result is
bit for bit the product's: each output is one weight plus the bias, rounded once either way.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.match import only_reader
from lite.dtypes import DataType
from schema import fb


def _index_input(graph: Graph, equal: Node) -> tuple[str, int] | None:
    """(x, N) when `equal` compares an integer x [..., 1] with the constant 0, 1, ..., N - 1 along the last axis."""
    if equal.attrs.get("mode") != fb.CompareMode.EQUAL or len(equal.inputs) != 2:
        return None
    for x, classes in (equal.inputs, equal.inputs[::-1]):
        c, v = graph.const(classes), graph.values[x]
        if c is None or graph.const(x) is not None or v.dynamic or v.dtype.kind not in "iu" or c.ndim == 0:
            continue
        n = c.shape[-1]
        if c.size == n and c.dtype.kind in "iu" and c.ndim <= v.rank and v.shape and v.shape[-1] == 1 \
                and np.array_equal(c.reshape(-1), np.arange(n)):
            return x, n
    return None


def _fuse_one(graph: Graph, equal: Node) -> bool:
    found = _index_input(graph, equal)
    cast = only_reader(graph, equal.outputs[0], "Cast") if found else None
    fc = only_reader(graph, cast.outputs[0], "FullConnection") if cast else None
    if fc is None or fc.inputs[0] != cast.outputs[0] or len(fc.inputs) > 3 or fc.attrs.get("activation", 0):
        return False
    x, n = found
    weight = graph.const(fc.inputs[1])
    bias = graph.const(fc.inputs[2]) if len(fc.inputs) > 2 and fc.inputs[2] else None
    out = graph.values[fc.outputs[0]]
    if (weight is None or weight.ndim != 2 or weight.shape[1] != n or weight.dtype != np.float32
            or not np.isfinite(weight).all() or cast.attrs.get("to") != DataType.FLOAT32
            or len(fc.inputs) > 2 and fc.inputs[2] and bias is None
            or any(graph.values[v].quant_params for v in (fc.inputs[1], fc.outputs[0]))):
        return False
    bias = np.zeros(weight.shape[0], np.float32) if bias is None else bias.astype(np.float32).reshape(-1)
    table = np.concatenate([weight.T + bias, bias[None]]).astype(np.float32)
    shape, name = graph.values[x].shape, fc.name
    wide, index, rows = (graph.fresh(f"{name}/{s}") for s in ("uint64", "index", "rows"))
    graph.values[wide] = Value(wide, shape, np.dtype(np.uint64))
    graph.values[index] = Value(index, shape, np.dtype(np.uint64))
    graph.values[rows] = Value(rows, shape + (weight.shape[0],), np.dtype(np.float32))
    at = graph.nodes.index(fc)
    graph.nodes[at:at + 1] = [
        Node("Cast", graph.fresh(f"{name}/to_uint64"), [x], [wide], {"to": DataType.UINT64}),
        Node("Minimum", graph.fresh(f"{name}/outside_to_bias"), [wide, graph.add_const(np.uint64(n), f"{name}/n")],
             [index]),
        Node("Gather", graph.fresh(f"{name}/lookup"), [graph.add_const(table, f"{name}/table"), index], [rows],
             {"axis": 0}),
        Node("Squeeze", graph.fresh(f"{name}/squeeze"), [rows, graph.add_const(np.array([-2], np.int64),
                                                                                f"{name}/axes")], [out.name])]
    return True


def fuse_one_hot(graph: Graph) -> None:
    for equal in graph.op_nodes("Compare"):
        _fuse_one(graph, equal)
    graph.prune()
