"""lite.threads' overload rule: on a machine with more runnable threads than `OVERLOAD` per core a run keeps to
its own thread (workers would wait for a time slice), otherwise the session's threads go to the pool that runs
most of the work."""
from __future__ import annotations

import os

import pytest

from lite import threads


@pytest.fixture
def load(monkeypatch):
    """Set the 1-minute load average the rule reads (per core), and forget the last reading."""
    def set_load(per_core: float) -> None:
        monkeypatch.setattr(os, "getloadavg", lambda: (per_core * (os.cpu_count() or 1), 0.0, 0.0))
        monkeypatch.setattr(threads, "_load", [-threads.LOAD_EVERY, False])
    return set_load


def test_a_busy_machine_runs_on_the_calling_thread(load) -> None:
    load(threads.OVERLOAD + 0.5)
    assert threads.overloaded()
    assert threads.split(2, True) == (1, 1) and threads.split(4, False) == (1, 1)


def test_a_quiet_machine_gets_the_threads_asked_for(load) -> None:
    load(threads.OVERLOAD - 0.5)
    assert not threads.overloaded()
    assert threads.split(2, True) == (2, 1) and threads.split(2, False) == (1, 2)
    assert threads.split(1, True) == (1, 1)


def test_the_load_is_read_at_most_once_a_second(load, monkeypatch) -> None:
    load(0.0)
    assert not threads.overloaded()
    monkeypatch.setattr(os, "getloadavg", lambda: (1e9, 0.0, 0.0))
    assert not threads.overloaded()                  # the reading of a moment ago still holds


def test_no_load_average_counts_as_quiet(load, monkeypatch) -> None:
    load(0.0)

    def unavailable() -> tuple[float, float, float]:
        raise OSError("no load average")
    monkeypatch.setattr(os, "getloadavg", unavailable)
    assert not threads.overloaded()
