"""MindSpore Lite's own `.ms` format: file identifier `MSL2`, layout `schema/mindspore_lite/mindspore_lite.fbs`.

The files the official `converter_lite` writes. `verify` walks every offset against our schema of the format,
`read` translates the official graph onto the runtime's ops and kernels (`ops.py`), weights as zero-copy views
where the file aligns them.
"""
from __future__ import annotations

from lite.format.bounds import check_bounds
from lite.format.mindspore_lite.reader import read
from schema.fbs_layout import load
from schema.mindspore_lite import FBS

__all__ = ["read", "verify"]


def verify(buf: memoryview) -> None:
    """Raise GraphFileError unless every table, vector and string of `buf` lies inside it, by our MSL2 schema."""
    check_bounds(buf, load(FBS))
