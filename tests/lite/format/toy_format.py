"""A second format for the registry's tests: our tables behind an 8-byte header of its own (identifier `TOY1`).

A format is one module like this (`verify`, `read`, optionally `write`) plus one line naming it in
`lite.format.FORMATS` (and, to write it, one in `converter.export.SAVE_TYPES`)."""
from __future__ import annotations

from typing import Any

from lite.format import mspy
from lite.model import Model

HEADER = b"\x00\x00\x00\x00TOY1"


def verify(buf: memoryview) -> None:
    mspy.verify(buf[len(HEADER):])


def read(buf: memoryview) -> Model:
    return mspy.read(buf[len(HEADER):])


def write(*definitions: Any) -> bytes:
    return HEADER + mspy.write(*definitions)
