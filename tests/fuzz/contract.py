"""The harnesses' contract: only a `LiteError` may end an input, within `TIME_LIMIT_S` seconds of CPU time."""
from __future__ import annotations

import signal
import warnings
from typing import Callable

from lite.status import LiteError

__all__ = ["InputTimeout", "TIME_LIMIT_S", "contract"]

TIME_LIMIT_S = 1.0          # per input, CPU seconds: the bound


class InputTimeout(BaseException):
    """An input ran past its time bound (a hang, to the fuzzer). A `BaseException`, like `KeyboardInterrupt`,
    so that no reader's `except Exception` turns it into a refusal."""


def _expired(signum: int, frame: object) -> None:
    raise InputTimeout(f"an input ran past {TIME_LIMIT_S} s of CPU time")


def contract(read: Callable[[bytes], object]) -> Callable[[bytes], None]:
    """`read` as a harness entry point: a `LiteError` is a refusal (fine), an `InputTimeout` or anything else
    escapes to the fuzzer as a finding. The bound counts the process's CPU time (ITIMER_PROF), not wall time:
    on a shared machine a niced fuzzer waits for a core, which is no hang of the reader. Runs in the main
    thread (signals)."""
    def TestOneInput(data: bytes) -> None:
        previous = signal.signal(signal.SIGPROF, _expired)
        signal.setitimer(signal.ITIMER_PROF, TIME_LIMIT_S)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")       # mutated weights may overflow: no fault
                read(data)
        except LiteError:
            pass
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGPROF, previous)
    TestOneInput.__doc__ = read.__doc__
    return TestOneInput
