"""Op attributes as plain namespaces with the schema's snake_case field names.

flatc's object API names fields in camelCase (`pad_top` -> `padTop`); the runtime and the converter both use
the schema's own names, so this module is the one place that translates.
"""
from __future__ import annotations

from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import flatbuffers

from schema import fb
from schema.fbs_layout import load


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@lru_cache(maxsize=None)
def field_names(op: str) -> tuple[str, ...]:
    return tuple(f.name for f in load().tables[op])


def read(op: str, table_object: Any) -> SimpleNamespace:
    """Attributes of an unpacked op table (`fb.Conv2DT`), or the schema defaults when it is None."""
    obj = table_object if table_object is not None else getattr(fb, op + "T")()
    return SimpleNamespace(**{name: getattr(obj, _camel(name)) for name in field_names(op)})


def build(op: str, values: dict[str, Any]) -> SimpleNamespace:
    """The schema defaults of `op` overridden by `values`; KeyError names an attribute the op lacks."""
    ns = read(op, None)
    for key, value in values.items():
        if key not in field_names(op):
            raise KeyError(f"op {op} has no attribute '{key}' (it has {', '.join(field_names(op)) or 'none'})")
        setattr(ns, key, value)
    return ns


def pack(op: str, attrs: SimpleNamespace, builder: flatbuffers.Builder) -> int:
    """Serialise attributes as the op's table; returns its offset in `builder`."""
    obj = getattr(fb, op + "T")()
    for name in field_names(op):
        setattr(obj, _camel(name), getattr(attrs, name))
    return obj.Pack(builder)
