"""Our `.ms` format: file identifier `MSPY`, layout `schema/model.fbs` (see docs/formats.md for what it carries).

`verify` walks every offset against the schema, `read` builds the runtime's graph with zero-copy weights, `write`
is the one writer (the converter's default `--saveType` and the training session's exports)."""
from __future__ import annotations

from lite.format.bounds import check_bounds
from lite.format.mspy.reader import read
from lite.format.mspy.writer import write
from schema.fbs_layout import load

__all__ = ["read", "verify", "write"]


def verify(buf: memoryview) -> None:
    """Raise GraphFileError unless every table, vector and string of `buf` lies inside it, by `model.fbs`."""
    check_bounds(buf, load())
