"""The field layout of `model.fbs`, read from the schema text, for verifying untrusted buffers.

Python FlatBuffers has no verifier, so the runtime walks a buffer with this description before trusting any offset.
Only the subset of the IDL that `model.fbs` uses is understood: enums, one union, tables of scalars, strings,
tables and vectors of those.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FBS = Path(__file__).resolve().parent / "model.fbs"
SCALAR_SIZES = {"bool": 1, "byte": 1, "ubyte": 1, "short": 2, "ushort": 2, "int": 4, "uint": 4, "float": 4,
                "long": 8, "ulong": 8, "double": 8}


@dataclass(frozen=True)
class Field:
    """One table field. `kind` is scalar | string | table | union | vector | vector_table | vector_string."""
    name: str
    slot: int        # vtable slot; the field's vtable entry is at byte 4 + 2 * slot
    kind: str
    size: int = 0    # scalar (or vector element) byte size
    ref: str = ""    # referenced table or union name


@dataclass(frozen=True)
class Layout:
    tables: dict[str, tuple[Field, ...]]
    unions: dict[str, tuple[str, ...]]   # union name -> member tables, in type-code order starting at 1
    root: str


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


@lru_cache(maxsize=1)
def load(path: Path = FBS) -> Layout:
    """Parse the schema once; the result is immutable."""
    text = _strip_comments(path.read_text())
    enums = {name: SCALAR_SIZES[base] for name, base in re.findall(r"enum\s+(\w+)\s*:\s*(\w+)", text)}
    unions = {name: tuple(m.strip() for m in body.split(",") if m.strip())
              for name, body in re.findall(r"union\s+(\w+)\s*\{([^}]*)\}", text)}
    tables: dict[str, tuple[Field, ...]] = {}
    for name, body in re.findall(r"table\s+(\w+)\s*\{([^}]*)\}", text):
        fields, slot = [], 0
        for fname, ftype in re.findall(r"(\w+)\s*:\s*(\[?\w+\]?)", body):
            fields.append(_field(fname, ftype, slot, enums, unions))
            slot += 2 if ftype in unions else 1
        tables[name] = tuple(fields)
    root = re.search(r"root_type\s+(\w+)", text).group(1)
    return Layout(tables, unions, root)


def _field(name: str, ftype: str, slot: int, enums: dict[str, int], unions: dict[str, tuple[str, ...]]) -> Field:
    vector = ftype.startswith("[")
    base = ftype.strip("[]")
    size = SCALAR_SIZES.get(base) or enums.get(base, 0)
    if base in unions:
        return Field(name, slot, "union", 1, base)
    if base == "string":
        return Field(name, slot, "vector_string" if vector else "string")
    if size:
        return Field(name, slot, "vector" if vector else "scalar", size)
    return Field(name, slot, "vector_table" if vector else "table", 0, base)
