"""Bounds-check every table, vector and string of a FlatBuffers buffer before anything trusts its offsets.

Python FlatBuffers reads whatever offsets a buffer holds, so a truncated or hostile file could otherwise raise
arbitrary exceptions, read garbage or loop for a long time. The walk follows the buffer's schema (a
`schema.fbs_layout.Layout`, parsed from the `.fbs` text) from its root table and raises `GraphFileError` naming
the first inconsistency. Every FlatBuffers-based format verifies its buffers with it.
"""
from __future__ import annotations

import struct

from lite.status import GraphFileError
from schema.fbs_layout import Field, Layout

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")


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


def check_bounds(buf: memoryview, layout: Layout) -> None:
    """Raise GraphFileError unless every offset reachable from the root table of `buf` stays inside it."""
    walker = _Walker(buf, layout)
    walker.table(walker.follow(0, "root offset"), layout.root)
