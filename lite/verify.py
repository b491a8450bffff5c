"""Bounds-check every table, vector and string of a `.ms` buffer before anything trusts its offsets.

Python FlatBuffers reads whatever offsets a buffer holds, so a truncated or hostile file could otherwise raise
arbitrary exceptions, read garbage or loop for a long time. This walker follows `schema/model.fbs` (via
`schema.fbs_layout`) and raises `GraphFileError` naming the first inconsistency. `verify_control_flow` then checks
what the structure cannot show: how control-flow nodes refer to their subgraphs.
"""
from __future__ import annotations

import struct
from typing import Any, NamedTuple, Sequence

from lite.dtypes import type_name
from lite.status import GraphFileError
from lite.traits import Bodies, traits
from schema import FILE_IDENTIFIER
from schema.fbs_layout import Field, Layout, load

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


class Part(NamedTuple):
    """A subgraph as the file states it: tensor indices of its inputs and outputs, indices of its nodes."""
    name: str
    inputs: list[int]
    outputs: list[int]
    members: list[int]


class _Walker:
    def __init__(self, buf: memoryview, layout: Layout):
        self.buf, self.size, self.layout = buf, len(buf), layout
        self.budget = self.size // 4 + 16   # a table takes at least 4 bytes: more visits mean shared subtrees

    def fail(self, what: str, pos: int) -> None:
        raise GraphFileError(f"model buffer is malformed: {what} at byte {pos} (buffer is {self.size} bytes)")

    def need(self, pos: int, length: int, what: str) -> None:
        if pos < 0 or length < 0 or pos + length > self.size:
            self.fail(f"{what} runs past the end", pos)

    def u32(self, pos: int, what: str) -> int:
        self.need(pos, 4, what)
        return _U32.unpack_from(self.buf, pos)[0]

    def follow(self, pos: int, what: str) -> int:
        """The position an unsigned offset stored at `pos` points to."""
        return pos + self.u32(pos, what)

    def table(self, pos: int, name: str) -> None:
        self.budget -= 1
        if self.budget < 0:
            self.fail("too many table references", pos)
        self.need(pos, 4, f"table {name}")
        vtable = pos - _I32.unpack_from(self.buf, pos)[0]
        self.need(vtable, 4, f"vtable of {name}")
        vt_size, tbl_size = _U16.unpack_from(self.buf, vtable)[0], _U16.unpack_from(self.buf, vtable + 2)[0]
        if vt_size < 4 or vt_size % 2 or tbl_size < 4:
            self.fail(f"vtable of {name} has bad sizes ({vt_size}, {tbl_size})", vtable)
        self.need(vtable, vt_size, f"vtable of {name}")
        self.need(pos, tbl_size, f"table {name}")

        def field_pos(slot: int, width: int, label: str) -> int | None:
            entry = 4 + 2 * slot
            if entry >= vt_size:
                return None
            off = _U16.unpack_from(self.buf, vtable + entry)[0]
            if off == 0:
                return None
            if off + width > tbl_size:
                self.fail(f"field {name}.{label} lies outside its table", pos)
            return pos + off

        for f in self.layout.tables[name]:
            self.field(f, name, field_pos)

    def field(self, f: Field, table: str, field_pos) -> None:
        label = f"{table}.{f.name}"
        if f.kind == "scalar":
            field_pos(f.slot, f.size, f.name)
            return
        if f.kind == "union":
            tpos = field_pos(f.slot, 1, f.name + "_type")
            vpos = field_pos(f.slot + 1, 4, f.name)
            code = self.buf[tpos] if tpos is not None else 0
            members = self.layout.unions[f.ref]
            if code > len(members):
                self.fail(f"{label} has unknown type code {code}", tpos)
            if code and vpos is None:
                self.fail(f"{label} has a type but no value", tpos)
            if code:
                self.table(self.follow(vpos, label), members[code - 1])
            return
        pos = field_pos(f.slot, 4, f.name)
        if pos is None:
            return
        target = self.follow(pos, label)
        if f.kind == "table":
            self.table(target, f.ref)
            return
        count = self.u32(target, label)
        width = {"vector": f.size, "string": 1}.get(f.kind, 4)
        if count > self.size:
            self.fail(f"{label} claims {count} elements", target)
        self.need(target + 4, count * width + (1 if f.kind == "string" else 0), label)
        if f.kind == "vector_table":
            for i in range(count):
                self.table(self.follow(target + 4 + 4 * i, label), f.ref)
        elif f.kind == "vector_string":
            for i in range(count):
                s = self.follow(target + 4 + 4 * i, label)
                self.need(s + 4, self.u32(s, label) + 1, label)


def verify_buffer(buf: bytes | bytearray | memoryview) -> None:
    """Raise GraphFileError unless `buf` is a structurally sound `.ms` model."""
    view = memoryview(buf).cast("B")
    if len(view) < 8:
        raise GraphFileError(f"model buffer is {len(view)} bytes: too small to be a .ms model")
    ident = bytes(view[4:8])
    if ident != FILE_IDENTIFIER:
        raise GraphFileError(f"not a .ms model: file identifier is {ident!r}, expected {FILE_IDENTIFIER!r}")
    layout = load()
    walker = _Walker(view, layout)
    walker.table(walker.follow(0, "root offset"), layout.root)


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
