"""`python -m lite.tools.fuzz model.ms [--cases 2000] [--decryptKey=hex]`: mutate a model file and load, compile
and run every mutant, to check that the runtime refuses bad files with a `LiteError` and nothing else.

Mutations (seeded): truncation, 1-8 flipped bits, a 4-byte word set to an extreme value (0, -1, INT_MAX,
INT_MIN, small counts), and a chunk copied over another place (splices). Each case is bounded in time
(SIGALRM, so run it in the main thread) and its allocation peak is measured (tracemalloc sees numpy's buffers).
"""
from __future__ import annotations

import argparse
import signal
import struct
import sys
import time
import tracemalloc
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from lite.context import Context
from lite.model import Model
from lite.session import LiteSession
from lite.status import LiteError

EXTREMES = (0, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000, 1, 2, 0xFFFF, 0x10000)


class CaseTimeout(Exception):
    """A case ran past its time bound (a hang, to the fuzzer)."""


@dataclass
class FuzzOutcome:
    cases: int = 0
    refused: int = 0            # ended in a LiteError
    ran: int = 0                # loaded, compiled and ran
    unchanged: int = 0          # the mutation left the bytes as they were
    peak_bytes: int = 0         # the largest allocation peak of one case
    slowest_s: float = 0.0
    unexpected: list[str] = field(default_factory=list)   # anything else: "<mutation>: <exception>"


def mutate(data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """One mutant of `data` and a description of the mutation."""
    buf = bytearray(data)
    kind = int(rng.integers(4))
    if kind == 0:
        size = int(rng.integers(len(buf)))
        return bytes(buf[:size]), f"truncate to {size}"
    if kind == 1:
        flips = [int(p) for p in rng.integers(0, len(buf) * 8, int(rng.integers(1, 9)))]
        for p in flips:
            buf[p // 8] ^= 1 << (p % 8)
        return bytes(buf), f"flip bits {flips}"
    if kind == 2:
        at, value = int(rng.integers(0, len(buf) - 3)) & ~3, EXTREMES[int(rng.integers(len(EXTREMES)))]
        struct.pack_into("<I", buf, at, value)
        return bytes(buf), f"word {value:#x} at {at}"
    length = int(rng.integers(1, 257))
    src, dst = (int(v) for v in rng.integers(0, max(len(buf) - length, 1), 2))
    buf[dst:dst + length] = data[src:src + length]
    return bytes(buf), f"splice {length} bytes {src} -> {dst}"


def _run_once(data: bytes, dec_key: bytes | str | None) -> None:
    model = Model.Import(data, dec_key=dec_key)
    if model.subgraphs:
        from lite.train import TrainSession
        session: LiteSession = TrainSession(Context(thread_num=1))
    else:
        session = LiteSession(Context(thread_num=1))
    session.CompileGraph(model)
    for tensor in session.GetInputs():
        tensor.MutableData()[...] = 0
    session.RunGraph()


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout()


def fuzz(data: bytes, cases: int, seed: int = 0, dec_key: bytes | str | None = None,
         timeout_s: float = 10.0) -> FuzzOutcome:
    """Run `cases` mutants of the model file `data`; see `FuzzOutcome`."""
    rng = np.random.default_rng(seed)
    outcome = FuzzOutcome()
    previous = signal.signal(signal.SIGALRM, _alarm)
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    try:
        for _ in range(cases):
            mutant, what = mutate(data, rng)
            outcome.cases += 1
            outcome.unchanged += mutant == data
            tracemalloc.reset_peak()
            started = time.perf_counter()
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")       # mutated weights may overflow; that is no failure
                    _run_once(mutant, dec_key)
                outcome.ran += 1
            except LiteError:
                outcome.refused += 1
            except CaseTimeout:
                outcome.unexpected.append(f"{what}: no answer within {timeout_s} s")
            except Exception as e:                        # anything but a LiteError is what we hunt for
                outcome.unexpected.append(f"{what}: {type(e).__name__}: {e}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            outcome.slowest_s = max(outcome.slowest_s, time.perf_counter() - started)
            outcome.peak_bytes = max(outcome.peak_bytes, tracemalloc.get_traced_memory()[1])
    finally:
        signal.signal(signal.SIGALRM, previous)
        if not tracing:
            tracemalloc.stop()
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lite.tools.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--decryptKey")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    args = parser.parse_args(argv)
    outcome = fuzz(args.model.read_bytes(), args.cases, args.seed, args.decryptKey, args.timeout)
    print(f"{outcome.cases} cases: {outcome.refused} refused with a LiteError, {outcome.ran} ran "
          f"({outcome.unchanged} unchanged), {len(outcome.unexpected)} unexpected; largest peak "
          f"{outcome.peak_bytes / 1e6:.1f} MB, slowest case {outcome.slowest_s:.2f} s")
    for line in outcome.unexpected[:20]:
        print("  " + line)
    return 1 if outcome.unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
