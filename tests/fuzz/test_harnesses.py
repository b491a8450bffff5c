"""CI's short fuzz budget: each harness from its seed corpus for a fixed number of executions (coverage-guided
when atheris is installed, seeded mutations otherwise; see tests/fuzz/run.py), in its own process under the
runner's memory cap; then the input of every past finding (tests/fuzz/regressions/<harness>/), under the runner's
time, memory and loop bounds."""
from __future__ import annotations

import importlib
import re
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

import lite.compiler
from lite.kernels.control_flow import loop
from tests.fuzz import HARNESSES, contract

HERE = Path(__file__).parent
REPO = HERE.parents[1]
RUNS = {"ms": 12000, "mindspore_lite": 7000, "mindir": 8000, "tflite": 30000, "onnx": 25000, "config": 12000,
        "benchmark": 80000, "federated": 15000}    # ≈ 5-15 s each on an idle core
HANG_S = 30.0                  # per input: only a hang, not a slow machine, exceeds it
ARENA_BYTES = 64 << 20         # the runner's default runtime memory limit
LOOP_ITERATIONS = 1000         # the runner's default bound on a data-dependent loop
EXTRA_BYTES = 256 << 20        # the runner's default allowance beyond the arena (tracemalloc sees numpy's buffers)


@pytest.mark.parametrize("harness", HARNESSES)
def test_short_campaign_finds_nothing(harness: str, tmp_path: Path) -> None:
    run = subprocess.run([sys.executable, "-m", "tests.fuzz.run", harness, "--runs", str(RUNS[harness]),
                          "--time-limit", str(HANG_S), "--work", str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert f"Done {RUNS[harness]} runs" in run.stdout + run.stderr


REGRESSIONS = sorted((HERE / "regressions").glob("*/*"))


@pytest.mark.parametrize("path", REGRESSIONS, ids=[f"{p.parent.name}/{p.name}" for p in REGRESSIONS])
def test_past_finding_is_refused(path: Path, monkeypatch) -> None:
    monkeypatch.setattr(contract, "TIME_LIMIT_S", HANG_S)
    monkeypatch.setattr(lite.compiler, "MAX_ARENA_BYTES", ARENA_BYTES)
    monkeypatch.setattr(loop, "MAX_ITERATIONS", LOOP_ITERATIONS)
    test = importlib.import_module(f"tests.fuzz.{path.parent.name}").TestOneInput
    tracemalloc.start()
    try:
        test(path.read_bytes())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < ARENA_BYTES + EXTRA_BYTES, f"{peak / 2**20:.0f} MB allocated"


FUZZ_COMPARISONS = """
import sys, tracemalloc
import atheris, numpy as np
from tests.fuzz import run

@atheris.instrument_func
def positive(a):
    return a > 0

a, done = np.arange(-128, 128), [0]

def target(data):
    positive(a)
    done[0] += 1
    if done[0] == 100:
        tracemalloc.start()
    elif done[0] == 1100:
        print("kept", tracemalloc.get_traced_memory()[0], flush=True)

atheris.Setup([sys.argv[0], "-runs=1200"], run.without_comparison_leak(target))
atheris.Fuzz()
"""


def test_fuzzed_comparisons_keep_no_result() -> None:
    """An instrumented numpy comparison, repeated while atheris fuzzes under the runner's comparison hook, keeps
    none of its results (atheris' own hook kept each one: about 280 MB over 957,683 `.ms` inputs, then a
    MemoryError under the cap)."""
    pytest.importorskip("atheris")
    run = subprocess.run([sys.executable, "-c", FUZZ_COMPARISONS], cwd=REPO, capture_output=True, text=True,
                         timeout=300)
    kept = re.search(r"kept (\d+)", run.stdout)
    assert kept is not None, run.stdout[-2000:] + run.stderr[-2000:]
    assert int(kept.group(1)) < 16 << 10, f"{kept.group(1)} B kept by 1,000 comparisons"
