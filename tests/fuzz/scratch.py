"""One scratch file per harness process, for readers that take a path rather than bytes."""
from __future__ import annotations

import atexit
import os
import tempfile


def scratch_file(suffix: str, data: bytes) -> str:
    """The path of a file now holding `data` (rewritten in place; removed at exit)."""
    path = _paths.get(suffix)
    if path is None:
        fd, path = tempfile.mkstemp(prefix="fuzz-", suffix=suffix)
        os.close(fd)
        atexit.register(os.unlink, path)
        _paths[suffix] = path
    with open(path, "wb") as f:
        f.write(data)
    return path


_paths: dict[str, str] = {}
