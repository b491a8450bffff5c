"""Cancelling the Transpose pairs the official converter leaves around elementwise ops.

Converting an NCHW model, the official converter runs convolutions in NHWC but keeps the tensors between them
that only elementwise ops touch (a residual Add and its skip path) in NCHW: Conv -> Transpose to NCHW -> Add ->
Transpose back to NHWC -> Conv. Our converter keeps such regions in NHWC, and our compiler then fuses the Add into
the convolution before it. So at read time each connected region of elementwise ops whose every input comes
through the same Transpose (or is a one-element constant) and whose every output leaves only through the inverse
Transpose is run in the layout before the Transposes: the same values, two copies fewer per region, and the
residual fusion applies.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.model import NodeDef, TensorDef

_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Maximum", "Minimum", "Activation"}


def _perm(node: NodeDef) -> tuple[int, ...]:
    return tuple(int(p) for p in node.attrs.perm)


def _inverse(perm: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(k) for k in np.argsort(perm))


def _layout_free(t: TensorDef) -> bool:
    return t.is_const and t.data.size == 1


def cancel_transposes(tensors: list[TensorDef], nodes: list[NodeDef], outputs: Sequence[int]) -> list[NodeDef]:
    """`nodes` with the Transposes around each cancellable elementwise region removed (its nodes rewired, its
    tensors' dims permuted in place); the nodes unchanged when there is none."""
    producer = {o: n for n in nodes for o in n.outputs}
    consumers: dict[int, list[NodeDef]] = {}
    for n in nodes:
        for i in n.inputs:
            if i >= 0:
                consumers.setdefault(i, []).append(n)
    graph_outputs = set(outputs)
    seen: set[int] = set()
    dropped: set[int] = set()
    for start in nodes:
        if start.op not in _ELEMENTWISE or id(start) in seen:
            continue
        region = _region(start, producer, consumers)
        seen.update(id(n) for n in region)
        plan = _plan(region, tensors, producer, consumers, graph_outputs)
        if plan is None:
            continue
        perm, entries, exits = plan
        back = _inverse(perm)
        inside = {o for n in region for o in n.outputs}
        for n in region:
            n.inputs = [producer[i].inputs[0] if i in entries else i for i in n.inputs]
        for t in inside:
            dims = tensors[t].dims
            if len(dims) == len(perm):
                tensors[t].dims = tuple(dims[k] for k in back)
        for exit_node in exits:         # its readers read the region's tensor, now in the exit's layout
            for reader in consumers.get(exit_node.outputs[0], []):
                reader.inputs = [exit_node.inputs[0] if i == exit_node.outputs[0] else i for i in reader.inputs]
            dropped.add(id(exit_node))
    if not dropped:
        return nodes
    kept = [n for n in nodes if id(n) not in dropped]
    read = {i for n in kept for i in n.inputs} | graph_outputs
    return [n for n in kept if n.op != "Transpose" or any(o in read for o in n.outputs)]


def _region(start: NodeDef, producer: dict[int, NodeDef],
            consumers: dict[int, list[NodeDef]]) -> list[NodeDef]:
    """The elementwise nodes connected to `start` through tensors they produce and read."""
    region, todo, found = [], [start], {id(start)}
    while todo:
        n = todo.pop()
        region.append(n)
        near = [producer.get(i) for i in n.inputs] + [c for o in n.outputs for c in consumers.get(o, [])]
        for m in near:
            if m is not None and m.op in _ELEMENTWISE and id(m) not in found:
                found.add(id(m))
                todo.append(m)
    return region


def _plan(region: list[NodeDef], tensors: list[TensorDef], producer: dict[int, NodeDef],
          consumers: dict[int, list[NodeDef]], graph_outputs: set[int]
          ) -> tuple[tuple[int, ...], set[int], list[NodeDef]] | None:
    """(the entry Transposes' perm, the tensors they write, the exit Transposes) when the region can run before
    the Transposes: every input from a Transpose of one perm or a one-element constant, every output read only by
    Transposes of the inverse perm (and no graph output); else None."""
    inside = {o for n in region for o in n.outputs}
    members = {id(n) for n in region}
    perms, entries, exits = set(), set(), []
    for n in region:
        for i in n.inputs:
            if i < 0 or i in inside or _layout_free(tensors[i]):
                continue
            source = producer.get(i)
            if source is None or source.op != "Transpose":
                return None
            perms.add(_perm(source))
            entries.add(i)
    if len(perms) != 1:
        return None
    [perm] = perms
    for t in inside:
        if t in graph_outputs:
            return None
        for reader in consumers.get(t, []):
            if reader.op == "Transpose":
                if _perm(reader) != _inverse(perm):
                    return None
                exits.append(reader)
            elif id(reader) not in members:
                return None
    return (perm, entries, exits) if exits else None
