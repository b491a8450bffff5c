"""Progress of the quantizer's long loops (calibration, AdaRound, the debug report, sensitivity) on stderr.

On a terminal one line is rewritten in place (a carriage return before each update); anywhere else (a pipe, a
log file, a CI job) carriage returns would glue the updates into one long line, so there plain lines are written,
only when another tenth of the work is done.
"""
from __future__ import annotations

import sys
from typing import TextIO

STEPS = 10          # plain lines per loop at most, off a terminal (every tenth of the way, the last included)


def progress(done: int, total: int, what: str, stream: TextIO | None = None) -> None:
    """Report `what: done/total` (done counts from 1) on `stream` (stderr by default)."""
    stream = sys.stderr if stream is None else stream
    line = f"{what}: {done}/{total}"
    if stream.isatty():
        print(f"\r{line}", end="\n" if done == total else "", file=stream, flush=True)
    elif done * STEPS // total > (done - 1) * STEPS // total:
        print(line, file=stream, flush=True)
