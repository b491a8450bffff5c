"""Shape inference and constant folding for the IR, through the runtime's own shape rules and kernels.

Dims unknown until run time (a symbolic batch) are inferred under two different probe sizes: a dim of an
activation that comes out equal under both is known. A *value* computed from an unknown dim (Shape of an input,
then Gather, Range, Concat, ...) is a symbolic value: it is never folded, and a node that reads one is dynamic
(below). Agreement under probes proves nothing about such a value: ops clip and saturate it (Slice ends, Min,
Clip), so `position[:, :L]` of a 16-row table gives the same 16 rows at L = 64 and at L = 96 while the model is
valid only for L <= 16; no choice of stand-in sizes avoids that, so what depends on the value is left to the
runtime, which infers it again at the real sizes. Fully static models have no symbolic value: nothing changes
for them.

A node whose shape rule needs a value known only at run time (`InferInvalidError`: a Reshape target that is a
graph input, a NonZero count) makes its outputs, and every value downstream of it, dynamic: all dims -1, with
the rank and dtype the source model's own type inference gives (else those of the node's first input: a
fallback, not a fact, so passes never treat a dynamic value's recorded shape as known). The runtime infers
them again while running.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from converter.ir import Graph, Node, Value
from lite.compiler import fold_or_infer
from lite.kernel import REFERENCE, TensorSpec, selection
from lite.model import NodeDef
from lite.status import InferInvalidError, InvalidOpAttrError
from schema import attrs as op_attrs
from schema import fb

PROBES = (64, 96)   # stand-ins for unknown dims; no activation is ever allocated at these sizes


def make_attrs(op: str, attrs: dict[str, Any]) -> SimpleNamespace:
    """`attrs` over the schema defaults of `op`, as the runtime's kernels see them."""
    try:
        return op_attrs.build(op, attrs)
    except KeyError as e:
        raise InvalidOpAttrError(e.args[0]) from None


def probe_specs(value: Value) -> tuple[TensorSpec, TensorSpec]:
    if value.const is not None and not value.variable:
        spec = TensorSpec(tuple(value.const.shape), value.const.dtype, value.const, value.quant_params or None,
                          value.quant_axis)
        return spec, spec
    if value.probes is None:
        return tuple(TensorSpec(tuple(p if d < 0 else d for d in value.shape), value.dtype,  # type: ignore
                                quant=value.quant_params or None) for p in PROBES)
    return value.probes


def is_symbolic_value(value: Value) -> bool:
    """Whether `value` is a value computed from unknown dims (left unfolded, so its probes carry values)."""
    return value.probes is not None and value.probes[0].value is not None


def mark_dynamic(graph: Graph, node: Node) -> None:
    """Make the outputs of `node` values whose shapes are known only at run time."""
    x = next((graph.values[i] for i in node.inputs if i), None)
    for name in node.outputs:
        old = graph.values.get(name)
        dtype, rank = graph.source_types.get(name, (x.dtype, x.rank) if x is not None else (np.float32, 0))
        graph.values[name] = Value(name, (-1,) * rank, np.dtype(dtype), None, old.format if old else fb.Format.ND,
                                   quant_params=old.quant_params if old else [], dynamic=True)


def infer_node(graph: Graph, node: Node) -> bool:
    """Infer (and where possible fold) `node`; returns True when it was folded into constants. A control-flow
    node keeps the output values its importer rule derived from its bodies (the runtime compiles the bodies)."""
    if node.bodies:
        return False
    nd = NodeDef(node.name, node.op, make_attrs(node.op, node.attrs), [], node.outputs, node.quant_type,
                 rounding=node.rounding)
    if any(graph.values[i].dynamic or is_symbolic_value(graph.values[i]) for i in node.inputs if i):
        mark_dynamic(graph, node)
        return False
    probes = [probe_specs(graph.values[i]) if i else (None, None) for i in node.inputs]
    out_quant = [graph.values[o].quant_params if o in graph.values else [] for o in node.outputs]
    try:
        with selection(REFERENCE):            # the numpy kernels: converting never starts a kernel backend
            first = fold_or_infer(nd, [p[0] for p in probes], out_quant)[0]
            static = all(a is b or (a.shape == b.shape and a.value is None and b.value is None) for a, b in probes)
            runs = [first, first if static else fold_or_infer(nd, [p[1] for p in probes], out_quant)[0]]
    except InferInvalidError:
        mark_dynamic(graph, node)
        return False
    folded = bool(node.outputs)
    for name, a, b in zip(node.outputs, *runs):
        same_value = (a.value is not None and b.value is not None and a.value.shape == b.value.shape
                      and np.array_equal(a.value, b.value))
        shape = tuple(x if x == y else -1 for x, y in zip(a.shape, b.shape))
        if len(a.shape) != len(b.shape):
            shape = a.shape
        old = graph.values.get(name)
        value = Value(name, shape, a.dtype, a.value if same_value else None,
                      old.format if old else fb.Format.ND, None if same_value else (a, b),
                      old.quant_params if old else [], old.quant_axis if old else 0,
                      old.source_perm if old else ())
        graph.values[name] = value
        folded &= same_value
    return folded


def infer_graph(graph: Graph) -> None:
    """(Re)infer every node in order, removing the nodes that fold."""
    graph.sort()
    for node in list(graph.nodes):
        if infer_node(graph, node) and not any(o in graph.inputs for o in node.outputs):
            graph.remove_node(node)
