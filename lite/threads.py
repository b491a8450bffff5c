"""Bounding the BLAS thread pool to the session's `Context.thread_num`."""
from __future__ import annotations

import contextlib
from functools import lru_cache
from typing import Iterator

from threadpoolctl import ThreadpoolController


@lru_cache(maxsize=1)
def _controller() -> ThreadpoolController:
    return ThreadpoolController()   # scanning the loaded libraries is slow: do it once per process


@contextlib.contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Run the block with at most `limit` BLAS threads, restoring the previous limit after."""
    with _controller().limit(limits=max(1, int(limit)), user_api="blas"):
        yield
