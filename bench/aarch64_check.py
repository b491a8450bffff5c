"""The compiled kernels on aarch64, under user-mode emulation: MobileNetV2 and the text encoder, float and int8
(MobileNetV2's static PTQ, the text encoder's DYNAMIC_QUANT), run from an ahead-of-time library built for aarch64
(8-lane tiles: two NEON registers a vector), against the numpy kernels.

    ../shared/tools/aarch64-python setup DIR          # once: an aarch64 Python with numpy and numba in DIR
    python bench/aarch64_check.py DIR [--tool ../shared/tools/aarch64-python] [--cc aarch64-linux-gnu-gcc]

Steps: the models are converted here; under emulation, numba compiles the kernels they bind and the build emits
their object (`python -m lite.kernels.compiled.aot.build --models ... --object-only`); `--cc` (a cross compiler
on this machine, e.g. Debian's gcc-aarch64-linux-gnu) links it with the runtime; under emulation again, each model
runs at 1 and 2 threads with `kernels="aot"` and with the numpy kernels, in one process that must not import
numba. The report (max difference relative to the output's magnitude, which kernels ran) is printed and written
to `bench/results/aarch64.md`. About 10x slower than native: minutes.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import harness  # noqa: E402
from aot_signatures import dynamic_int8, static_int8  # noqa: E402
from bench_startup import write_files  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TOOL = REPO.parent / "shared" / "tools" / "aarch64-python"
MODELS = ("mobilenet_v2", "text_encoder")
INT8 = {"mobilenet_v2": static_int8, "text_encoder": dynamic_int8}      # each model's int8 form
RESULTS = Path(__file__).resolve().parent / "results" / "aarch64.md"
TOLERANCE = 1e-5        # of the output's magnitude: float32 rounding (fused multiply-adds against numpy's order)

COMPARE = """
import json, platform, sys
import numpy as np
import lite
from lite.kernel import describe_backend

def run(path, kind, mode, threads):
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=threads, kernels=mode))
    session.CompileGraph(lite.Model.Load(path))
    tensor = session.GetInputs()[0]
    data = tensor.MutableData()
    rng = np.random.default_rng(0)
    data[...] = rng.integers(0, 32, data.shape) if kind == "tokens" else rng.standard_normal(data.shape)
    session.RunGraph()
    compiled = sum(step.kernel.compiled for step in session._plan.steps)
    return next(iter(session.GetOutputs().values())).numpy().copy(), compiled

rows = []
for path, kind in json.loads(sys.argv[1]):
    for threads in (1, 2):
        got, compiled = run(path, kind, "aot", threads)
        want, _ = run(path, kind, "numpy", threads)
        rows.append([path, threads, compiled, float(np.abs(got - want).max() / np.abs(want).max())])
print(json.dumps({"rows": rows, "machine": platform.machine(), "numba": "numba" in sys.modules,
                  "describe": describe_backend("aot")}))
"""


def snapshot(folder: Path) -> Path:
    """A copy of the runtime's packages (lite, schema) that the emulated processes run: the library's build and
    its use see the same sources (a library of other sources is refused)."""
    source = folder / "src"
    shutil.rmtree(source, ignore_errors=True)
    for package in ("lite", "schema"):
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__", "lib"))
    return source


def emulated(tool: Path, folder: Path, source: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MSLITE_", "NUMBA_", "PYTHONPATH"))}
    env["MSLITE_AOT_DIR"] = str(folder / "lib")
    return subprocess.run([str(tool), "run", str(folder), *args], capture_output=True, text=True, cwd=source,
                          env=env, timeout=3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir", type=Path, help="the emulated Python's folder (`aarch64-python setup DIR`)")
    parser.add_argument("--tool", type=Path, default=TOOL)
    parser.add_argument("--cc", default="aarch64-linux-gnu-gcc", help="C compiler linking for aarch64")
    parser.add_argument("--report", type=Path, default=RESULTS, help="where the report goes")
    args = parser.parse_args(argv)
    from lite.kernels.compiled.aot import build, library_name
    load_before = os.getloadavg()[0]
    models = args.dir / "models"
    models.mkdir(parents=True, exist_ok=True)
    files = [write_files(name, models) for name in MODELS]
    for (ms, onnx_path, shape, kind), name in zip(list(files), MODELS):
        import onnx
        int8 = models / f"{name}_int8.ms"
        int8.write_bytes(INT8[name](onnx.load(onnx_path)))
        files.append((str(int8), onnx_path, shape, kind))
    source = snapshot(args.dir)
    start = time.perf_counter()
    made = emulated(args.tool, args.dir, source, "-m", "lite.kernels.compiled.aot.build", "--models",
                    *(ms for ms, *_ in files), "--object-only", "--out", str(args.dir / "lib"))
    if made.returncode != 0:
        raise SystemExit(f"the emulated build failed:\n{made.stderr[-3000:]}")
    built = time.perf_counter() - start
    name = library_name("aarch64")
    build.link(args.dir / "lib" / f"{name}.o", args.dir / "lib" / f"lib{name}.so", args.cc,
               source / "lite" / "kernels" / "compiled" / "aot" / "runtime.c")
    start = time.perf_counter()
    models_json = json.dumps([[ms, kind] for ms, _, _, kind in files])
    compared = emulated(args.tool, args.dir, source, "-c", COMPARE, models_json)
    if compared.returncode != 0:
        raise SystemExit(f"the emulated comparison failed:\n{compared.stderr[-3000:]}")
    ran = time.perf_counter() - start
    result = json.loads(compared.stdout.splitlines()[-1])
    rows = [[Path(path).stem, str(threads), str(compiled), f"{error:.1e}", "yes" if error <= TOLERANCE else "NO"]
            for path, threads, compiled, error in result["rows"]]
    table = harness.markdown(["model", "threads", "compiled nodes", "max difference / max |numpy|", "within 1e-5"],
                             rows, "lrrrl")
    body = (f"aarch64 under user-mode emulation ({result['machine']}): {result['describe']}; numba imported by the "
            f"comparing process: {'yes' if result['numba'] else 'no'}. Emulated JIT compile and object emission "
            f"{built:.0f} s, comparison {ran:.0f} s; linked with {args.cc}.\n\n{table}")
    harness.write_report(args.report, body, load_before, {"linker": args.cc})
    ok = not result["numba"] and all(error <= TOLERANCE for *_, error in result["rows"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
