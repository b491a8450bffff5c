"""Bounding a session's threads to `Context.thread_num`: the BLAS pool (threadpoolctl) and, once started, the
kernel backends' own pools (`lite.kernel.thread_pools`: numba's), for the duration of a run. The user's own
settings come back afterwards."""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Iterable

from threadpoolctl import ThreadpoolController

from lite.kernel import thread_pools

_scanned: tuple[int, list] | None = None
_lock = threading.Lock()
_running = 0                  # runs inside `thread_limit`, over all threads
_pools: list[list] = []       # per BLAS library: [controller, the user's count, its count now]


def _blas() -> list:
    """The BLAS libraries loaded in this process. Scanning them is slow, so the scan is redone only after new
    modules were imported (one may have brought its own BLAS, as scipy does)."""
    global _scanned
    if _scanned is None or _scanned[0] != len(sys.modules):
        _scanned = (len(sys.modules), [c for c in ThreadpoolController().lib_controllers if c.user_api == "blas"])
    return _scanned[1]


class thread_limit:
    """`with thread_limit(n, blas):` runs the block with at most n backend-kernel threads and `blas` BLAS
    threads (n when omitted), then gives the user's own settings back.

    The BLAS pools are process-wide: the first run to start (in any thread) reads their counts and the last to
    end restores them, so runs overlapping in several threads never restore a count another one set. A
    backend's count is per launching thread and comes back when the block ends. A library is told only when its
    count differs, so a run whose limit is the user's setting costs one query per library (0.8 us). A class, not
    a generator: `contextlib.contextmanager` alone cost 2 us a run."""
    __slots__ = ("limit", "blas", "restore")

    def __init__(self, limit: int, blas: int | None = None):
        self.limit = max(1, int(limit))
        self.blas = self.limit if blas is None else max(1, int(blas))

    def __enter__(self) -> None:
        global _running
        limit = self.blas
        with _lock:
            if _running == 0:
                _pools[:] = [[c, n, n] for c in _blas() for n in (c.get_num_threads(),)]
            _running += 1
            for pool in _pools:
                if pool[2] != limit:
                    pool[0].set_num_threads(limit)
                    pool[2] = limit
        self.restore = []
        for pool in thread_pools():
            own, user = min(self.limit, pool.max_threads), pool.get()
            if user != own:
                pool.set(own)
                self.restore.append((pool, user))

    def __exit__(self, *exc: object) -> None:
        global _running
        for pool, user in self.restore:
            pool.set(user)
        with _lock:
            _running -= 1
            if _running == 0:
                for pool in _pools:
                    if pool[2] != pool[1]:
                        pool[0].set_num_threads(pool[1])
                        pool[2] = pool[1]


BLAS_SHARE = 0.1    # plans whose BLAS products are at most this share of their multiply-adds run compiled-first


def compiled_first(kernels: Iterable[Any]) -> bool:
    """Whether the runs of a plan of `kernels` give the threads to the backend kernels (BLAS gets one) rather
    than to BLAS (the backend kernels get one).

    The two pools cannot share the cores: each keeps its workers awake for a moment after a call (OpenBLAS by its
    own timeout, the compiled kernels' OpenMP pool for `compiled.SPIN_COUNT` turns), and a call of
    the other pool in that moment waits for the core (1.4 -> 8.3 ms for twenty 3136x64x64 compiled GEMMs and one
    1x1280x1000 BLAS product on 2 threads). So the pool that runs most of the work gets them: the backend's when
    one has started and BLAS runs at most BLAS_SHARE of the plan's multiply-adds (`Kernel.macs`,
    `Kernel.blas_macs`)."""
    if not thread_pools():
        return False
    macs = blas = 0
    for kernel in kernels:
        macs += kernel.macs
        blas += kernel.blas_macs
    return blas <= BLAS_SHARE * macs


# Runnable threads per core (the 1-minute load average over the cores) above which a run keeps to its own thread.
# A threaded region of the compiled kernels (OpenMP) and of OpenBLAS ends when its last worker does, and on a
# machine with more runnable threads than cores a worker may wait for a time slice before it starts: face mesh at
# 2 threads took 50 ms a run at load 17 on 2 cores, 1.2 ms on one thread. The session's own threads count in the
# load (2 on a quiet 2-core machine running a 2-thread session), hence the margin of one thread per core.
OVERLOAD = 1.5
LOAD_EVERY = 1.0          # seconds between two readings of the load average (a reading takes a few us)
_load = [-LOAD_EVERY, 0.0]     # [when read, busy]


def overloaded() -> bool:
    """Whether the machine has more runnable threads than `OVERLOAD` per core (read at most every LOAD_EVERY
    seconds; False where the load average is unavailable)."""
    now = time.monotonic()
    if now - _load[0] >= LOAD_EVERY:
        try:
            _load[1] = os.getloadavg()[0] > OVERLOAD * (os.cpu_count() or 1)
        except (OSError, AttributeError):       # no load average here (or none on this platform)
            _load[1] = False
        _load[0] = now
    return bool(_load[1])


def split(threads: int, backend_pool: bool) -> tuple[int, int]:
    """(backend-kernel threads, BLAS threads) out of `Context.thread_num` (`compiled_first`); one of each while
    the machine is `overloaded`: then the calling thread runs the work no worker could start on time."""
    if threads > 1 and overloaded():
        return 1, 1
    return (threads, 1) if backend_pool else (1, threads)


SERIAL_BLAS_MACS = 1 << 23     # multiply-adds (~1 ms on one core) below which a product runs on one BLAS thread


class serial_blas:
    """`with serial_blas(macs):` runs a product of `macs` multiply-adds on one BLAS thread when it is smaller
    than `SERIAL_BLAS_MACS`, then gives the run's count back. A second thread gains a small product little and,
    on a loaded machine, makes it wait for that thread's time slice: the kws GRU's 49x64x192 input projection
    took 0.05 ms on one OpenBLAS thread and 12-30 ms on two at load 3-5. Setting a count costs ~7 us."""
    __slots__ = ("macs", "lowered")

    def __init__(self, macs: int):
        self.macs = macs

    def __enter__(self) -> None:
        with _lock:
            self.lowered = [p for p in _pools if p[2] > 1] if self.macs < SERIAL_BLAS_MACS else []
            for pool in self.lowered:
                pool[0].set_num_threads(1)

    def __exit__(self, *exc: object) -> None:
        with _lock:
            for pool in self.lowered:
                pool[0].set_num_threads(pool[2])
