"""Arena planning: buffer sizes and lifetimes in, byte offsets out. Knows nothing about ops.

Greedy by size, as TFLite Micro's planner: the largest buffers are placed first, each at the lowest offset
where it overlaps no already placed buffer whose lifetime intersects its own.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Buffer:
    """`size` bytes needed from step `first` through step `last` (inclusive)."""
    size: int
    first: int
    last: int

    def overlaps_in_time(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


def _align(n: int, alignment: int) -> int:
    return -(-n // alignment) * alignment


def plan(buffers: list[Buffer], alignment: int = 64) -> tuple[list[int], int]:
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
