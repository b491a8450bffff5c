"""Bounding a session's threads to `Context.thread_num`: the BLAS pool (threadpoolctl) and, once loaded, the
compiled kernels' pool (numba)."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from threadpoolctl import ThreadpoolController

from lite.kernels import compiled

_scanned: tuple[int, list] | None = None


def _blas() -> list:
    """The BLAS libraries loaded in this process. Scanning them is slow, so the scan is redone only after new
    modules were imported (one may have brought its own BLAS, as scipy does)."""
    global _scanned
    if _scanned is None or _scanned[0] != len(sys.modules):
        _scanned = (len(sys.modules), [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"])
    return _scanned[1]


@contextlib.contextmanager
def thread_limit(limit: int) -> Iterator[None]:
    """Run the block with at most `limit` BLAS threads and compiled-kernel threads, restoring the previous
    limits after. Talks to each library directly (~1 us) rather than through threadpoolctl's `limit`, which
    rescans every library (~30 us, a fifth of a small model's run)."""
    limit = max(1, int(limit))
    changed = [(c, c.num_threads) for c in _blas() if c.num_threads != limit]
    for c, _ in changed:
        c.set_num_threads(limit)
    numba = compiled.loaded()
    threads = None
    if numba is not None:
        threads = numba.get_num_threads()
        numba.set_num_threads(min(limit, numba.config.NUMBA_NUM_THREADS))
    try:
        yield
    finally:
        if threads is not None:
            numba.set_num_threads(threads)
        for c, previous in changed:
            c.set_num_threads(previous)
