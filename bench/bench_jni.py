"""Overhead of the Java API (`jni/`): LeNet-5 inference with its input and output copies, from Java against
the same loop in Python.

    python bench/bench_jni.py [--rounds 9] [--iterations 2000] [--threads 2]

Both sides run LeNet-5 (batch 1, 1x32x32, zoo weights) converted by `converter.convert`, with 2 threads.
Java (`jni/bench/LeNetLoop.java`, built here with `make -C jni`): `input.setData(float[])`, `runGraph()`,
`output.getFloatData()`. Python: `input.set_data(array)`, `RunGraph()`, `output.numpy()`. The Java program
stays up and runs one timed round per request, so rounds alternate between the two sides (which goes first
alternates too); the table gives the median over rounds of the time per iteration, and a second row the cost of
one trivial call (`elementsNum()` / `ElementsNum()`). Printed and written atomically to `bench/results/jni.md`,
with the load average before and after.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import lite  # noqa: E402
import models  # noqa: E402
from harness import write_report  # noqa: E402
from converter import convert  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "jni.md"
CALLS = 100_000


def build(folder: Path) -> Path:
    """The jar and library in `folder`, and LeNetLoop compiled beside them; returns the class path."""
    subprocess.run(["make", "-s", "-C", str(REPO / "jni"), f"BUILD={folder}", f"PYTHON={sys.executable}"],
                   check=True)
    jar = folder / "mindspore-lite-java.jar"
    subprocess.run(["javac", "--release", "11", "-cp", str(jar), "-d", str(folder / "bench"),
                    str(REPO / "jni" / "bench" / "LeNetLoop.java")], check=True)
    return Path(f"{jar}{os.pathsep}{folder / 'bench'}")


class JavaLoop:
    """LeNetLoop running in its own JVM, one timed round per request."""

    def __init__(self, classpath: Path, model: Path, threads: int):
        self.process = subprocess.Popen(
            ["java", f"-Dmindspore.lite.python={sys.executable}", "-cp", str(classpath), "LeNetLoop", str(model),
             str(threads)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        assert self.process.stdout.readline().strip() == "ready"

    def round(self, kind: str, n: int) -> float:
        self.process.stdin.write(f"{kind} {n}\n")
        self.process.stdin.flush()
        return float(self.process.stdout.readline())

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


class PythonLoop:
    def __init__(self, model: Path, threads: int):
        self.session = lite.LiteSession.CreateSession(lite.Context(thread_num=threads))
        self.session.CompileGraph(lite.Model.Load(model))
        self.input = self.session.GetInputs()[0]
        self.output = next(iter(self.session.GetOutputs().values()))
        self.x = np.sin(np.arange(self.input.ElementsNum())).astype(np.float32).reshape(self.input.shape())

    def round(self, kind: str, n: int) -> float:
        started = time.perf_counter()
        if kind == "loop":
            for _ in range(n):
                self.input.set_data(self.x)
                self.session.RunGraph()
                self.output.numpy()
        else:
            for _ in range(n):
                self.input.ElementsNum()
        return (time.perf_counter() - started) * 1e6 / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        classpath = build(Path(tmp) / "jni")
        model = Path(tmp) / "lenet5.ms"
        model.write_bytes(convert(models.build("lenet5")))
        load_before = os.getloadavg()[0]
        sides = {"Python": PythonLoop(model, args.threads), "Java": JavaLoop(classpath, model, args.threads)}
        times: dict[tuple[str, str], list[float]] = {(s, k): [] for s in sides for k in ("loop", "call")}
        for side in sides.values():
            side.round("loop", args.iterations // 4)              # warm-up
        for r in range(args.rounds):
            for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
                times[name, "loop"].append(sides[name].round("loop", args.iterations))
                times[name, "call"].append(sides[name].round("call", CALLS))
        sides["Java"].close()
    median = {key: statistics.median(values) for key, values in times.items()}
    rows = [("setData + runGraph + getFloatData, LeNet-5 1x1x32x32", "loop"),
            ("one trivial call (elementsNum)", "call")]
    lines = ["| per iteration | Python µs | Java µs | Java / Python |", "|---|---:|---:|---:|"]
    for label, kind in rows:
        py, java = median["Python", kind], median["Java", kind]
        lines.append(f"| {label} | {py:.2f} | {java:.2f} | {java / py:.3f} |")
    spread = [j / p for j, p in zip(times["Java", "loop"], times["Python", "loop"])]
    table = "\n".join(lines) + (f"\n\nMedians of {args.rounds} alternating rounds of {args.iterations} iterations "
                                f"({CALLS} for the call), {args.threads} threads; Java/Python per round for the "
                                f"loop: {min(spread):.3f}-{max(spread):.3f}.")
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    write_report(RESULTS, table, load_before, {"java": java})


if __name__ == "__main__":
    main()
