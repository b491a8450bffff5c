"""Bounding a session's threads to `Context.thread_num`: the BLAS pool (threadpoolctl) and, once loaded, the
compiled kernels' pool (numba)."""
from __future__ import annotations

import contextlib
import sys
import threading
from typing import Iterator

from threadpoolctl import ThreadpoolController

from lite.kernels import compiled

_scanned: tuple[int, list] | None = None
_set: dict[int, int] = {}            # id(library controller) -> the BLAS limit last set
_local = threading.local()           # numba's limit is per launching thread


def _blas() -> list:
    """The BLAS libraries loaded in this process. Scanning them is slow, so the scan is redone only after new
    modules were imported (one may have brought its own BLAS, as scipy does)."""
    global _scanned
    if _scanned is None or _scanned[0] != len(sys.modules):
        _scanned = (len(sys.modules), [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"])
    return _scanned[1]


@contextlib.contextmanager
def thread_limit(limit: int) -> Iterator[None]:
    """Run the block with at most `limit` BLAS threads and compiled-kernel threads.

    The pools are process-wide, so the limit stays set after the block (the next session sets its own): a
    library is told only when the limit changes, since setting and restoring OpenBLAS's count around every run
    cost more than a small model's run (~0.1 ms), and threadpoolctl's `limit` rescans every library (~30 us)."""
    limit = max(1, int(limit))
    for c in _blas():
        if _set.get(id(c)) != limit:
            c.set_num_threads(limit)
            _set[id(c)] = limit
    numba = compiled.loaded()
    if numba is not None and getattr(_local, "numba", None) != limit:
        numba.set_num_threads(min(limit, numba.config.NUMBA_NUM_THREADS))
        _local.numba = limit
    yield
