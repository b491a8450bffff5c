"""Progress of the quantizer's long loops (calibration, AdaRound, bias correction, mixed precision, the debug
report) on stderr, with the time left.

On a terminal one line is rewritten in place (a carriage return before each update) as a bar; anywhere else (a
pipe, a log file, a CI job) carriage returns would glue the updates into one long line, so there plain lines are
written, only when another tenth of the work is done. The time left is the time so far scaled by the work left
over the work done, the work of each step given by its weight (AdaRound's layers differ in cost by 100x).
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Sequence, TextIO

STEPS = 10          # plain lines per loop at most, off a terminal (every tenth of the way, the last included)
BAR = 24            # characters of the bar on a terminal


def duration(seconds: float) -> str:
    """`42 s`, `3 min 05 s`."""
    seconds = max(int(round(seconds)), 0)
    return f"{seconds} s" if seconds < 60 else f"{seconds // 60} min {seconds % 60:02d} s"


class Progress:
    """One loop of `total` steps (or of `weights`, one per step): `step()` after each."""

    def __init__(self, what: str, total: int | None = None, weights: Sequence[float] | None = None,
                 stream: TextIO | None = None, clock: Callable[[], float] = time.monotonic):
        self.what, self.stream, self.clock = what, sys.stderr if stream is None else stream, clock
        self.weights = [float(w) for w in weights] if weights is not None else [1.0] * (total or 0)
        self.total, self.done, self.work = len(self.weights), 0, 0.0
        self.start = clock()

    def step(self) -> None:
        self.work += self.weights[self.done]
        self.done += 1
        elapsed = self.clock() - self.start
        whole = sum(self.weights)
        if self.done == self.total:
            when = f", {duration(elapsed)}"
        else:
            when = f", about {duration(elapsed * (whole - self.work) / self.work)} left" if self.work > 0 else ""
        if self.stream.isatty():
            filled = int(BAR * self.work / whole) if whole > 0 else BAR
            line = f"{self.what} [{'#' * filled}{'.' * (BAR - filled)}] {self.done}/{self.total}{when}"
            print(f"\r{line}\x1b[K", end="\n" if self.done == self.total else "", file=self.stream, flush=True)
        elif self.done * STEPS // self.total > (self.done - 1) * STEPS // self.total:
            print(f"{self.what}: {self.done}/{self.total}{when}", file=self.stream, flush=True)
