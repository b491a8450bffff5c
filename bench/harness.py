"""What the benchmarks share: the machine line, the timing modes and the report.

Three ways to time a system's call (`bench_inference.py` reports all three):
- **own process** (`fresh_process`): each system in a fresh Python process of its own, warm-up runs, then timed
  runs; rounds rotate the systems' order. Nothing else shares the process's caches, allocator or thread pools:
  the numbers that count. The same process also gives the cold start (process start -> first output).
- **back-to-back** (`interleaved`, gap 0): all systems in one process, each timed call right after an untimed
  call of the same system, the systems' order rotating between rounds.
- **idle gap** (`interleaved`, gap 10 ms): as above, but the timed call follows 10 ms of sleep, as a camera
  pipeline calls a model: thread wake-up and cold caches count.
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

IDLE_GAP = 0.010


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def sgemm_error() -> float:
    """Max relative error of a float32 BLAS matmul against float64: a wrong BLAS kernel shows here."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((257, 263)), rng.standard_normal((263, 251))
    exact = a @ b
    return float(np.abs((a.astype(np.float32) @ b.astype(np.float32)) - exact).max() / np.abs(exact).max())


def machine_line(versions: Mapping[str, str]) -> str:
    """CPU, cores, Python, numpy and the given packages' versions, the BLAS in use and a BLAS sanity check."""
    from threadpoolctl import threadpool_info

    from lite.kernel import describe_backend as describe
    blas = "; ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')} kernel)"
                     for i in threadpool_info() if i["user_api"] == "blas") or "none found"
    packages = ", ".join(f"{name} {version}" for name, version in versions.items())
    return (f"Machine: {cpu_name()} ({platform.machine()}), {os.cpu_count()} cores; Python "
            f"{platform.python_version()}, numpy {np.__version__}, {packages}; BLAS: {blas}, OPENBLAS_CORETYPE "
            f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}, float32 matmul rel. error {sgemm_error():.1e}; "
            f"ours: {describe()}")


def installed_versions(packages: Iterable[str]) -> dict[str, str]:
    """The installed version of each package, leaving out those that are not installed."""
    found = {}
    for package in packages:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            continue
    return found


def write_report(path: Path, body: str, load_before: float, versions: Mapping[str, str]) -> None:
    """Print the report (machine, date, tables, load average around the measurements) and write it atomically:
    a figure quoted from it can always be read with the machine, the load and the day it was measured on."""
    from lite.atomic_file import write_atomic
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = f"1-minute load average {load_before:.1f} before the measurements, {os.getloadavg()[0]:.1f} after."
    report = f"{machine_line(versions)}\nMeasured {date}.\n\n{body}\n\n{load}\n"
    print("\n" + report)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.encode())


def median(times: Sequence[float] | None) -> float | None:
    return statistics.median(times) if times else None


def fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def rotated(items: Sequence[str], r: int) -> list[str]:
    k = r % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def interleaved(calls: Mapping[str, Callable[[], object]], rounds: int, gap: float = 0.0
                ) -> dict[str, list[float]]:
    """Times (ms) of each call over `rounds`, the order rotating. gap 0: each timed call right after an untimed
    one of the same system; gap > 0: after that many seconds of sleep instead."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for r in range(rounds):
        for name in rotated(list(calls), r):
            if gap:
                time.sleep(gap)
            else:
                calls[name]()
            start = time.perf_counter()
            calls[name]()
            times[name].append((time.perf_counter() - start) * 1e3)
    return times


def time_in_process(call: Callable[[], object], warmup: int, runs: int, gap: float = 0.0,
                    min_seconds: float = 0.0) -> list[float]:
    """The worker side of `fresh_process`: warm-up calls, then timed ones (ms): `runs` of them, and more until
    they add up to `min_seconds`, so that a sub-millisecond model's median rests on enough runs to be stable."""
    for _ in range(warmup):
        call()
    times: list[float] = []
    spent = 0.0
    while len(times) < runs or spent < min_seconds * 1e3:
        if gap:
            time.sleep(gap)
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
        spent += times[-1]
    return times


def report_from_worker(first_output: float, times: list[float], **extra: object) -> None:
    """What a worker prints for `fresh_process`: one JSON line."""
    print(json.dumps({"first_output": first_output, "times": times, **extra}), flush=True)


class Native(tuple):
    """A worker that is a native program, `Native((path, *args))`: run as it is, not under Python, so its cold
    start is the program's own. It prints the same JSON line (`report_from_worker`)."""


def fresh_process(argv: Sequence[str], timeout: float = 900) -> dict | None:
    """Run a worker (`python argv...`, or a `Native` program) in a new process; its JSON line, with `cold_ms` =
    process start -> first output; None (with a note) when it fails."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}   # a deployed app keeps .pyc
    command = list(argv) if isinstance(argv, Native) else [sys.executable, *argv]
    started = time.time()
    result = subprocess.run([*command, f"--spawned-at={started}"], capture_output=True, text=True,
                            timeout=timeout, env=env)
    line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith("{")), None)
    if result.returncode != 0 or line is None:
        tail = (result.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"note: worker {' '.join(argv[1:])} failed: {tail}")
        return None
    data = json.loads(line)
    data["cold_ms"] = (data["first_output"] - started) * 1e3
    return data


def own_process_rounds(workers: Mapping[str, Sequence[str]], rounds: int) -> dict[str, dict[str, list[float]]]:
    """Each system's worker in its own fresh process, `rounds` times, the order rotating: per system the median
    of each process's timed runs and its cold start. One untimed process per system comes first, so on-disk
    caches (numba's compiled kernels, invalidated whenever their source changes; bytecode, which workers write
    even where PYTHONDONTWRITEBYTECODE is set: installed packages ship theirs) are filled and every cold start is
    a second process start's, as a deployed application sees it."""
    for argv in workers.values():
        fresh_process(argv)
    out: dict[str, dict[str, list[float]]] = {name: {"ms": [], "cold_ms": []} for name in workers}
    for r in range(rounds):
        for name in rotated(list(workers), r):
            data = fresh_process(workers[name])
            if data is not None:
                out[name]["ms"].append(statistics.median(data["times"]))
                out[name]["cold_ms"].append(data["cold_ms"])
    return out


def markdown(header: Iterable[str], rows: Iterable[Iterable[str]], align: str) -> str:
    """A markdown table; `align` has one letter per column, l or r."""
    head = list(header)
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" if a == "l" else "---:" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
