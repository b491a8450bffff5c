"""The harnesses' contract: only a `LiteError` may end an input, within `TIME_LIMIT_S` seconds."""
from __future__ import annotations

import signal
import warnings
from typing import Callable

from lite.status import LiteError
from lite.tools.fuzz import CaseTimeout

__all__ = ["TIME_LIMIT_S", "contract"]

TIME_LIMIT_S = 10.0         # per input, a hang bound: numba's first compile of a kernel variant takes seconds


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout(f"an input ran past {TIME_LIMIT_S} s")


def contract(read: Callable[[bytes], object]) -> Callable[[bytes], None]:
    """`read` as a harness entry point: a `LiteError` is a refusal (fine), a `CaseTimeout` or anything else
    escapes to the fuzzer as a finding. Runs in the main thread (SIGALRM)."""
    def TestOneInput(data: bytes) -> None:
        previous = signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # mutated weights may overflow: no fault
                read(data)
        except LiteError:
            pass
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    TestOneInput.__doc__ = read.__doc__
    return TestOneInput
