"""Pausing Python's cyclic garbage collector while start-up builds long-lived objects.

numba's start-up, reading a model and compiling a graph allocate hundreds of thousands of objects that all stay
alive; every few hundred allocations the collector scans the young ones, and now and then all of them, and frees
nothing. The collector took 0.25 s of the 2 s of CPU from process start to an int8 EfficientNet-Lite0 session;
pausing it in these three saves 0.07-0.09 s of it (the rest falls in imports).
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Run the block with the collector off (nested or concurrent blocks: until the last one ends); it comes
    back on only if it was on when the first block began."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
