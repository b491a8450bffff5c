"""Files for readers that take a path rather than bytes."""
from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def scratch_file(suffix: str, data: bytes) -> Iterator[str]:
    """The path of a new file holding `data`, removed afterwards (libFuzzer ends the process without running
    Python's exit handlers, so nothing may wait for them)."""
    fd, path = tempfile.mkstemp(prefix="fuzz-", suffix=suffix)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)
