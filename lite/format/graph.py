"""From a file's flat tables to the runtime's graph: the checks and ordering every format's reader shares.

A reader parses its format into `TensorDef`s, `NodeDef`s (with their `attrs`) and the file's subgraphs as `Part`s;
`assemble` then refuses what no well-formed graph has (a tensor written twice, a cycle, a read of a tensor nothing
produces, control-flow nodes that refer to their bodies wrongly) and orders the nodes for execution.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Sequence

from lite.dtypes import type_name
from lite.model import Model, NodeDef, SubGraphDef, TensorDef
from lite.rewrites import topological_order
from lite.status import GraphFileError
from lite.traits import Bodies, traits


class Part(NamedTuple):
    """A subgraph as the file states it: tensor indices of its inputs and outputs, indices of its nodes."""
    name: str
    inputs: list[int]
    outputs: list[int]
    members: list[int]


def assemble(name: str, version: str, tensors: list[TensorDef], nodes: list[NodeDef], inputs: list[int],
             outputs: list[int], parts: list[Part], buffer: Any, fmk_type: int) -> Model:
    """The model of a file: `nodes` and `parts` in file order (tensor indices already checked against
    `tensors`); the parts that control-flow nodes run become their bodies, the others named subgraphs (training
    parts); `buffer` is kept alive as long as the weights view it."""
    body_parts, owner = verify_control_flow(nodes, parts, [t.data_type for t in tensors])
    _written_once(nodes, tensors, [*inputs, *(t for s in body_parts for t in parts[s].inputs)])
    ordered = _topological_order([nd for k, nd in enumerate(nodes) if k not in owner], tensors, inputs)
    rank = {id(node): k for k, node in enumerate(ordered)}
    subgraphs, bodies = {}, {}
    for s, part in enumerate(parts):
        if s in body_parts:
            bodies[s] = _body(part, [nd for k, nd in enumerate(nodes) if owner.get(k) == s], tensors)
        else:
            subgraphs[part.name] = SubGraphDef(part.name, part.inputs, part.outputs,
                                               sorted((nodes[k] for k in part.members), key=lambda nd: rank[id(nd)]))
    for node in nodes:
        spec = traits(node.op).bodies
        if spec is not None:
            node.bodies = [bodies[int(getattr(node.attrs, a))] for a in spec.attrs]
    return Model(name, version, tensors, ordered, inputs, outputs, subgraphs, buffer, fmk_type,
                 list(bodies.values()))


def verify_control_flow(nodes: Sequence[Any], parts: Sequence[Part],
                        data_types: Sequence[int]) -> tuple[set[int], dict[int, int]]:
    """Check how control-flow nodes (`traits(op).bodies`) refer to the file's subgraphs; return the subgraphs that
    are bodies and the body each body node belongs to (node index -> subgraph index). `nodes` are the file's nodes (`op`, `attrs`, `inputs`,
    `outputs`, `name`), `parts` its subgraphs in file order, `data_types` the TypeId of every tensor.

    Refused with `GraphFileError`: a reference out of range; a node in two bodies, or a body node in a training
    part; a cycle of bodies (a body that runs itself, directly or through others, would never finish compiling);
    a body whose inputs or outputs disagree with the node's in count or data type."""
    refs: dict[int, list[int]] = {}         # node index -> the subgraphs it runs
    for k, node in enumerate(nodes):
        spec = traits(node.op).bodies
        if spec is None:
            continue
        refs[k] = [int(getattr(node.attrs, a)) for a in spec.attrs]
        for attr, s in zip(spec.attrs, refs[k]):
            if not 0 <= s < len(parts):
                raise GraphFileError(f"{node.op} node '{node.name}': {attr} refers to subgraph {s}, but the model "
                                     f"has {len(parts)}")
            _check_interface(node, spec, attr, parts[s], data_types)
    bodies = {s for ss in refs.values() for s in ss}
    owner: dict[int, int] = {}
    for s, part in enumerate(parts):
        for k in part.members:
            if s in bodies and k in owner:
                raise GraphFileError(f"node '{nodes[k].name}' belongs to two bodies: subgraphs "
                                     f"'{parts[owner[k]].name}' and '{part.name}'")
            if s in bodies:
                owner[k] = s
    for s, part in enumerate(parts):
        stray = next((k for k in part.members if k in owner), None) if s not in bodies else None
        if stray is not None:
            raise GraphFileError(f"subgraph '{part.name}' lists node '{nodes[stray].name}' of the body "
                                 f"'{parts[owner[stray]].name}'")
    runs: dict[int, set[int]] = {s: set() for s in bodies}     # body -> the bodies its nodes run
    for k, ss in refs.items():
        if k in owner:
            runs[owner[k]].update(ss)
    _refuse_cycles(runs, parts)
    return bodies, owner


def _check_interface(node: Any, spec: Bodies, attr: str, part: Part, data_types: Sequence[int]) -> None:
    """The node's inputs and outputs line up with the body's (`Bodies`), in count and data type."""
    sides = (("input", node.inputs, spec.inputs_from, part.inputs, spec.body_inputs_from),
             ("output", node.outputs, 0, part.outputs, spec.body_outputs_from))
    for side, node_side, skip, body, own in sides:
        ours, theirs = node_side[skip:], body[own:]
        if len(body) < own or len(ours) != len(theirs):
            raise GraphFileError(f"{node.op} node '{node.name}': its {attr} '{part.name}' has {len(body)} {side}s, "
                                 f"{own + len(ours)} expected ({own} of its own and one per {side} of the node)")
        for k, (a, b) in enumerate(zip(ours, theirs)):
            if a >= 0 and data_types[a] != data_types[b]:
                raise GraphFileError(f"{node.op} node '{node.name}': its {side} {k + skip} "
                                     f"is {type_name(data_types[a])}, but {side} {k + own} of its {attr} "
                                     f"'{part.name}' is {type_name(data_types[b])}")


def _refuse_cycles(runs: dict[int, set[int]], parts: Sequence[Part]) -> None:
    """Depth-first search of the bodies' call graph (iterative: a long chain must not exhaust the stack)."""
    state: dict[int, int] = {}      # 1: on the current path, 2: done
    for root in runs:
        if root in state:
            continue
        stack = [(root, iter(sorted(runs[root])))]
        state[root] = 1
        while stack:
            s, pending = stack[-1]
            t = next(pending, None)
            if t is None:
                state[s] = 2
                stack.pop()
            elif state.get(t) == 1:
                raise GraphFileError(f"subgraph '{parts[t].name}' runs itself (a cycle of control-flow bodies "
                                     f"through '{parts[s].name}')")
            elif t not in state:
                state[t] = 1
                stack.append((t, iter(sorted(runs[t]))))


def _body(part: Part, members: list[NodeDef], tensors: list[TensorDef]) -> SubGraphDef:
    """A control-flow body: its nodes ordered over its own inputs, every output made by it (or an input or a
    constant of it)."""
    ordered = _topological_order(members, tensors, part.inputs, f"subgraph '{part.name}'")
    made = {t for nd in members for t in nd.outputs} | set(part.inputs)
    for t in part.outputs:
        if t not in made and not tensors[t].is_const:
            raise GraphFileError(f"subgraph '{part.name}' outputs tensor '{tensors[t].name}', which it does not "
                                 f"produce")
    return SubGraphDef(part.name, part.inputs, part.outputs, ordered)


def _written_once(nodes: list[NodeDef], tensors: list[TensorDef], inputs: list[int]) -> None:
    """No tensor is written by two nodes (of any graph), nor is a constant or an input of a graph written."""
    written = set(inputs) | {t.index for t in tensors if t.is_const}
    for node in nodes:
        for t in node.outputs:
            if t in written:
                raise GraphFileError(f"tensor '{tensors[t].name}' is written twice (node '{node.name}')")
            written.add(t)


def _topological_order(nodes: list[NodeDef], tensors: list[TensorDef], inputs: list[int],
                       graph: str = "the graph") -> list[NodeDef]:
    """Nodes in an order where every input is ready before use; rejects cycles and dangling inputs (a body
    node reading a tensor of another graph, too)."""
    producer = {t: i for i, node in enumerate(nodes) for t in node.outputs}
    ready = {t.index for t in tensors if t.is_const} | set(inputs)
    pending = {i: {t for t in n.inputs if t >= 0 and t not in ready} for i, n in enumerate(nodes)}
    for i, node in enumerate(nodes):
        for t in pending[i]:
            if t not in producer:
                raise GraphFileError(f"node '{node.name}' reads tensor '{tensors[t].name}', which nothing in "
                                     f"{graph} produces")
    order = topological_order(list(pending.values()), [n.outputs for n in nodes])
    if len(order) != len(nodes):
        placed = set(order)
        stuck = next(nodes[i].name for i in pending if i not in placed)
        raise GraphFileError(f"{graph} has a cycle through node '{stuck}'")
    return [nodes[i] for i in order]
