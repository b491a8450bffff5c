"""The bench harness's timing loop: a sub-millisecond model is timed for long enough, a slow one `runs` times."""
from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize("step_s, runs, expected", [(0.1, 3, 10), (2.0, 3, 3), (0.001, 5, 1000)])
def test_time_in_process_fills_min_seconds(step_s: float, runs: int, expected: int,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))
    import harness
    clock = [0.0]

    def call() -> None:                         # a model whose every run takes step_s on a fake clock
        clock[0] += step_s

    monkeypatch.setattr(harness.time, "perf_counter", lambda: clock[0])
    times = harness.time_in_process(call, warmup=2, runs=runs, min_seconds=1.0)
    assert len(times) == pytest.approx(expected, abs=1)
    assert all(t == pytest.approx(step_s * 1e3) for t in times)
