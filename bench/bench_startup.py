"""Start-up and memory: process start -> first output, and the process's peak resident memory, on MobileNetV2 and
the text encoder, each engine in its own fresh process.

    python bench/bench_startup.py [--rounds 5] [--models mobilenet_v2,text_encoder] [--systems aot,jit,numpy,ORT]

Systems: ours with the compiled kernels from the ahead-of-time library (`aot`, `Context(kernels="aot")`; the bench
builds it first when this checkout's kernel sources have none, as a first use would: docs/deployment.md), ours with numba's JIT (`jit`, kernels="compiled", its on-disk cache filled), ours with
the numpy kernels (`numpy`), and onnxruntime (`ORT`); all with 2 threads, run as `bench_inference.py` runs them (its
runners). The worker loads the model, builds the session, runs once (the first output: the cold start's end), runs
RUNS more times, and reports its peak RSS (`peak_mb`) and its median run. One untimed process per system fills the
on-disk caches first (as `harness.own_process_rounds` does). Each worker says whether numba was imported. The report is
printed and written to `bench/results/startup.md`.
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402
from bench_inference import THREADS, onnxruntime, ours  # noqa: E402

RUNS = 20
ENV = "MSLITE_KERNELS"        # lite.kernel.ENV, set before lite is imported
KERNELS = {"aot": "aot", "jit": "compiled", "numpy": "numpy"}
SYSTEMS = (*KERNELS, "ORT")
MODELS = ("mobilenet_v2", "text_encoder")
RESULTS = Path(__file__).resolve().parent / "results" / "startup.md"


def feed(kind: str, shape: tuple[int, ...]) -> np.ndarray:
    rng = np.random.default_rng(0)
    return rng.integers(0, 32, shape).astype(np.int64) if kind == "tokens" else \
        rng.standard_normal(shape).astype(np.float32)


def worker(system: str, path: str, kind: str, shape: tuple[int, ...]) -> None:
    if system != "ORT":
        os.environ[ENV] = KERNELS[system]
    run = (onnxruntime if system == "ORT" else ours)(path, shape)
    x = feed(kind, shape)
    run(x)
    first = time.time()
    times = harness.time_in_process(lambda: run(x), 0, RUNS)
    harness.report_from_worker(first, times, peak_mb=peak_mb(), numba="numba" in sys.modules)


def peak_mb() -> float:
    """This process's peak resident memory: VmHWM (a process's own since its exec; ru_maxrss keeps the
    parent's peak when that was higher), else ru_maxrss."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_files(name: str, folder: Path) -> tuple[str, str, tuple[int, ...], str]:
    """(our .ms, the ONNX file, the input shape, the input kind) of zoo model `name` at batch 1."""
    import onnx

    from converter import convert
    if name == "text_encoder":
        from models.text import text_encoder
        model, kind = text_encoder(batch=1)[1], "tokens"
    else:
        from models import build
        model, kind = build(name), "image"
    shape = tuple(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    onnx_path, ms_path = folder / f"{name}.onnx", folder / f"{name}.ms"
    onnx.save(model, onnx_path)
    ms_path.write_bytes(convert(model, {model.graph.input[0].name: list(shape)}))
    return str(ms_path), str(onnx_path), shape, kind


READY = """
from lite.kernels.compiled import aot
from lite.kernels.compiled.aot import first_use
if "ahead of time" not in aot.describe():
    print("waiting for the ahead-of-time library:", first_use.start(aot.cache_dir()), flush=True)
    first_use.wait(aot.cache_dir())
"""


def library_ready() -> None:
    """Have the ahead-of-time library of these kernel sources: look for it, start its first-use build now when
    there is none, and wait for that build (in another process: this one describes the library in the report)."""
    subprocess.run([sys.executable, "-c", READY], check=True, cwd=Path(__file__).resolve().parents[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per system and model")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {','.join(MODELS)}")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated, from {','.join(SYSTEMS)}")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--kind", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--spawned-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.file, args.kind, tuple(int(d) for d in args.shape.split(",")))
        return 0
    systems = args.systems.split(",")
    if "aot" in systems:
        library_ready()
    load_before = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            ms_path, onnx_path, shape, kind = write_files(name, Path(tmp))
            workers = {s: [str(Path(__file__).resolve()), "--worker", s, "--file", onnx_path if s == "ORT" else ms_path,
                           "--kind", kind, "--shape", ",".join(map(str, shape))] for s in systems}
            results = {s: [] for s in systems}
            for argv_ in workers.values():
                harness.fresh_process(argv_)                       # fills the on-disk caches
            for r in range(args.rounds):
                for s in harness.rotated(systems, r):
                    data = harness.fresh_process(workers[s])
                    if data is not None:
                        results[s].append(data)
            ort_cold = harness.median([d["cold_ms"] for d in results.get("ORT", [])])
            ort_peak = harness.median([d["peak_mb"] for d in results.get("ORT", [])])
            for s in systems:
                done = results[s]
                cold = harness.median([d["cold_ms"] for d in done])
                peak = harness.median([d["peak_mb"] for d in done])
                run = harness.median([float(np.median(d["times"])) for d in done])
                numba = "yes" if any(d["numba"] for d in done) else "no" if done and s != "ORT" else ""
                rows.append([name, s, harness.fmt(cold, ".0f"), harness.fmt(harness.ratio(cold, ort_cold), ".2f"),
                             harness.fmt(peak, ".0f"), harness.fmt(harness.ratio(peak, ort_peak), ".2f"),
                             harness.fmt(run, ".2f"), numba])
            print(f"{name}: done", flush=True)
    table = harness.markdown(["model", "system", "start -> first output ms", "x ORT", "peak RSS MB", "x ORT",
                              "run ms (median)", "numba imported"], rows, "llrrrrrl")
    body = (f"Start-up and memory, each system in its own fresh process, {args.rounds} rounds (medians), "
            f"{THREADS} threads, batch 1. aot: compiled kernels from the ahead-of-time library; jit: the same "
            f"kernels from numba's JIT (on-disk cache filled); numpy: the numpy kernels; ORT: onnxruntime.\n\n{table}")
    import onnxruntime
    harness.write_report(RESULTS, body, load_before, {"onnxruntime": onnxruntime.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
