"""Arena planning: buffer sizes and lifetimes in, byte offsets out. Knows nothing about ops.

Greedy by size, as TFLite Micro's planner: the largest buffers are placed first, each at the lowest offset
where it overlaps no already placed buffer whose lifetime intersects its own.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lite.status import MemoryFailedError


@dataclass(frozen=True)
class Buffer:
    """`size` bytes needed from step `first` through step `last` (inclusive)."""
    size: int
    first: int
    last: int

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


ALIGNMENT = 64     # bytes: a cache line, and an AVX-512 vector, so aligned vector loads never split a line


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def aligned_zeros(nbytes: int, what: str = "an arena") -> np.ndarray:
    """`nbytes` zero bytes starting on an ALIGNMENT boundary (numpy's own allocations start on 16 bytes);
    `MemoryFailedError` naming `what` and its size when the system refuses them."""
    try:
        raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
    except MemoryError:
        raise MemoryFailedError(f"cannot allocate {what} of {nbytes} bytes: out of memory") from None
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes]


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` starting on an ALIGNMENT boundary: packed weights that vector loads read."""
    copy = aligned_zeros(array.nbytes).view(array.dtype).reshape(array.shape)
    copy[...] = array
    return copy


def plan(buffers: list[Buffer], alignment: int = ALIGNMENT) -> tuple[list[int], int]:
    """Offsets for `buffers` (same order) and the arena size; every offset is a multiple of `alignment`."""
    offsets = [0] * len(buffers)
    placed: list[int] = []
    total = 0
    for i in sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, buffers[i].first, i)):
        need = _align(buffers[i].size, alignment)
        busy = sorted((offsets[j], offsets[j] + _align(buffers[j].size, alignment)) for j in placed
                      if buffers[j].overlaps_in_time(buffers[i]))
        at = 0
        for start, end in busy:
            if at + need <= start:
                break
            at = max(at, end)
        offsets[i] = at
        placed.append(i)
        total = max(total, at + need)
    return offsets, total


class RunPool:
    """Memory for the tensors whose sizes are known only while running (the dynamic part of a graph).

    A run asks for its buffers in order with `take(size, first, last)`. While a run asks for exactly the
    sizes and lifetimes of the run the pool was last planned for, every buffer is a view into the pool's
    arena and nothing is allocated; from the first differing request on, the run gets fresh arrays, and
    `finish` re-plans the arena for that run (growing it only when the new plan needs more bytes). So runs
    of repeating shapes reuse one block of memory, and a shape change costs one re-plan.
    """

    def __init__(self, limit: int, alignment: int = ALIGNMENT):
        self.limit = limit
        self.alignment = alignment
        self.arena = np.zeros(0, np.uint8)
        self.layout: list[Buffer] = []      # the requests of the run the arena was planned for
        self.offsets: list[int] = []
        self.plans = 0                      # how many times the arena was (re)planned
        self.allocations = 0                # arrays allocated outside the arena, over all runs
        self.arena_allocations = 0          # how many times the arena itself was allocated
        self.begin()

    def begin(self) -> None:
        self.requests: list[Buffer] = []
        self.in_arena = True

    def take(self, size: int, first: int, last: int) -> np.ndarray | None:
        """`size` bytes for steps `first`..`last` of this run; None when they would break the memory limit."""
        need = Buffer(size, first, last)
        live = size + sum(b.size for b in self.requests if b.last >= first)
        if live > self.limit:
            return None
        k = len(self.requests)
        self.requests.append(need)
        self.in_arena = self.in_arena and k < len(self.layout) and self.layout[k] == need
        if self.in_arena:
            return self.arena[self.offsets[k]:self.offsets[k] + size]
        self.allocations += 1
        return np.empty(size, np.uint8)

    def finish(self) -> None:
        """End a run: re-plan the arena when this run's requests differ from the planned ones."""
        if self.requests != self.layout:
            offsets, total = plan(self.requests, self.alignment)
            if total > self.arena.nbytes:
                self.arena = aligned_zeros(total)
                self.arena_allocations += 1
            self.layout, self.offsets = self.requests, offsets
            self.plans += 1
        self.begin()
