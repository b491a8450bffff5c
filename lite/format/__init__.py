"""Model file formats, found by the FlatBuffers file identifier (bytes 4..8 of a buffer).

Each format is one module that defines `verify(buf)` (raise `GraphFileError` unless every offset of the buffer is
safe to follow) and `read(buf) -> lite.model.Model` (the runtime's graph), and may define `write(...) -> bytes`.
`FORMATS` names each module by its identifier, so a new format is that module plus one line here; a module is
imported only when a buffer of its format is read.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

from lite.status import GraphFileError


class Known(NamedTuple):
    module: str    # defines verify(buf) and read(buf) -> Model, optionally write(...) -> bytes
    title: str     # how messages name the format


FORMATS: dict[bytes, Known] = {
    b"MSPY": Known("lite.format.mspy", "ours"),
    b"MSL2": Known("lite.format.mindspore_lite", "MindSpore Lite's own"),
}


def identifier(buf: memoryview) -> bytes:
    """The buffer's file identifier; `GraphFileError` when the buffer is too small to hold one."""
    if len(buf) < 8:
        raise GraphFileError(f"model buffer is {len(buf)} bytes: too small to be a .ms model")
    return bytes(buf[4:8])


def find(buf: memoryview) -> ModuleType:
    """The module of the buffer's format, by its file identifier; `GraphFileError` naming the known ones."""
    ident = identifier(buf)
    known = FORMATS.get(ident)
    if known is None:
        names = ", ".join(f"{i!r} ({k.title})" for i, k in FORMATS.items())
        raise GraphFileError(f"unknown .ms format: file identifier {ident!r}; known: {names}")
    return importlib.import_module(known.module)
