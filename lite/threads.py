"""Bounding the BLAS thread pool to the session's `Context.thread_num`."""
from __future__ import annotations

import contextlib
import sys
from typing import Iterator

from threadpoolctl import ThreadpoolController

_scanned: tuple[int, ThreadpoolController] | None = None


def _controller() -> ThreadpoolController:
    """The BLAS libraries loaded in this process. Scanning them is slow, so the scan is redone only after new
    modules were imported (one may have brought its own BLAS, as scipy does)."""
    global _scanned
    if _scanned is None or _scanned[0] != len(sys.modules):
        _scanned = (len(sys.modules), ThreadpoolController())
    return _scanned[1]


@contextlib.contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Run the block with at most `limit` BLAS threads, restoring the previous limit after."""
    with _controller().limit(limits=max(1, int(limit)), user_api="blas"):
        yield
