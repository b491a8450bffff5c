"""Inference latency of this runtime, onnxruntime and PyTorch eager, side by side on the same ONNX models.

    python bench/bench_inference.py [--rounds 7] [--models lenet5,resnet50,mobilenet_v2,efficientnet_lite0]
                                    [--batches 1,16]

Every system gets 2 threads: our session `Context(thread_num=2)`; onnxruntime with 2 intra-op threads, 1 inter-op
thread, `session.intra_op.allow_spinning=0` and ORT_ENABLE_ALL; PyTorch eager (`models.torch_reference.to_torch`)
with `torch.set_num_threads(2)`, `torch.inference_mode()` and OMP_WAIT_POLICY=PASSIVE (set before torch loads,
unless already set). Rounds are interleaved: each round times every system once on every (model, batch), right
after an untimed run of the same call, with the systems' order rotating, so drifting machine load hits all
systems alike; the table gives the median over rounds. Every system's output is compared with onnxruntime's (max
abs difference). The table is printed and written atomically to `bench/results/inference.md`.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # read once, when torch loads libgomp
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from threadpoolctl import threadpool_info  # noqa: E402

import lite  # noqa: E402
import models  # noqa: E402
from converter import convert  # noqa: E402
from lite.serialize import write_atomic  # noqa: E402
from models.torch_reference import to_torch  # noqa: E402

THREADS = 2
EFFICIENTNET_LITE0 = REPO.parent / "shared" / "models" / "efficientnet_lite0.onnx"
RESULTS = Path(__file__).resolve().parent / "results" / "inference.md"
SYSTEMS = ("ours", "ORT", "torch")

Runner = Callable[[np.ndarray], np.ndarray]


def free_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """The EfficientNet-Lite0 export with its batch unfixed: the input's dim 0 becomes symbolic and the head's
    `Reshape(x, [1, -1])` becomes `Reshape(x, [0, -1])` (keep dim 0), so every system can run batch 16."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    constants = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    for node in model.graph.node:
        shape = constants.get(node.input[1]) if node.op_type == "Reshape" else None
        if shape is not None and numpy_helper.to_array(shape.attribute[0].t).tolist() == [1, -1]:
            shape.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([0, -1], np.int64)))
    return model


ZOO: dict[str, Callable[[], onnx.ModelProto | None]] = {
    "lenet5": lambda: models.build("lenet5", num_classes=10, input_size=32, batch=None),
    "resnet50": lambda: models.build("resnet50", input_size=224, batch=None),
    "mobilenet_v2": lambda: models.build("mobilenet_v2", input_size=224, batch=None),
    "efficientnet_lite0": lambda: free_batch(onnx.load(EFFICIENTNET_LITE0)) if EFFICIENTNET_LITE0.exists() else None,
}


# ---- the three systems: each builds a runner for (ONNX model with a free batch dim, input shape) -------------
def ours(model: onnx.ModelProto, shape: tuple[int, ...]) -> Runner:
    buf = convert(model, {model.graph.input[0].name: list(shape)})
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS))
    tensor, output = session.GetInputs()[0], next(iter(session.GetOutputs().values()))

    def run(x: np.ndarray) -> np.ndarray:
        tensor.set_data(x)
        session.RunGraph()
        return output.numpy()
    return run


def onnxruntime(model: onnx.ModelProto, shape: tuple[int, ...]) -> Runner:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name, output = session.get_inputs()[0].name, session.get_outputs()[0].name
    return lambda x: session.run([output], {name: x})[0]


def pytorch(model: onnx.ModelProto, shape: tuple[int, ...]) -> Runner:
    module = to_torch(model).eval()

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(x)).numpy()
    return run


BUILDERS: dict[str, Callable[[onnx.ModelProto, tuple[int, ...]], Runner]] = {
    "ours": ours, "ORT": onnxruntime, "torch": pytorch}


# ---- measuring -----------------------------------------------------------------------------------------------
@dataclass
class Case:
    """One (model, batch): a runner per system that could run it, their timings (ms) and outputs."""
    model: str
    batch: int
    feed: np.ndarray
    runners: dict[str, Runner]
    times: dict[str, list[float]]
    outputs: dict[str, np.ndarray]


def input_shape(model: onnx.ModelProto, batch: int) -> tuple[int, ...]:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return (batch, *(d.dim_value for d in dims[1:]))


def prepare(name: str, model: onnx.ModelProto, batch: int) -> Case:
    """Build every system's runner and run it once untimed (warm-up, output kept); a system that fails is
    reported and left out."""
    shape = input_shape(model, batch)
    feed = np.random.default_rng(batch).standard_normal(shape).astype(np.float32)
    case = Case(name, batch, feed, {}, {}, {})
    for system, build in BUILDERS.items():
        try:
            runner = build(model, shape)
            case.outputs[system] = runner(feed)
        except Exception as e:   # a missing kernel or op must not stop the other measurements
            print(f"note: {system} cannot run {name} batch {batch}: {type(e).__name__}: {e}".splitlines()[0])
            continue
        case.runners[system], case.times[system] = runner, []
    return case


def run_rounds(cases: list[Case], rounds: int) -> None:
    """Interleaved rounds: each round times every system once on every case, right after an untimed run of the
    same call (so no system is timed cold, just after another one evicted its weights from the caches). The
    systems' order rotates from round to round, so none always follows the same neighbour."""
    for r in range(rounds):
        for case in cases:
            systems = list(case.runners)
            for system in systems[r % len(systems):] + systems[:r % len(systems)]:
                runner = case.runners[system]
                runner(case.feed)
                start = time.perf_counter()
                runner(case.feed)
                case.times[system].append((time.perf_counter() - start) * 1e3)
        print(f"round {r + 1}/{rounds} done", flush=True)


# ---- reporting -----------------------------------------------------------------------------------------------
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


def machine_line() -> str:
    blas = "; ".join(f"{i['internal_api']} {i.get('version')} ({i.get('architecture')} kernel)"
                     for i in threadpool_info() if i["user_api"] == "blas") or "none found"
    coretype = os.environ.get("OPENBLAS_CORETYPE", "unset")
    return (f"Machine: {cpu_name()} ({platform.machine()}), {os.cpu_count()} cores; Python "
            f"{platform.python_version()}, numpy {np.__version__}, onnxruntime {ort.__version__}, torch "
            f"{torch.__version__}; BLAS: {blas}, OPENBLAS_CORETYPE {coretype}, float32 matmul rel. error "
            f"{sgemm_error():.1e}")


def write_report(path: Path, table_text: str, load_before: float) -> None:
    """Print the report (machine, table, load average around the rounds) and write it atomically to `path`."""
    load = f"1-minute load average {load_before:.1f} before the rounds, {os.getloadavg()[0]:.1f} after."
    report = f"{machine_line()}\n\n{table_text}\n\n{load}\n"
    print("\n" + report)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, report.encode())


def _ms(times: list[float] | None) -> float | None:
    return statistics.median(times) if times else None


def _fmt(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _diff(case: Case, system: str) -> float | None:
    if system not in case.outputs or "ORT" not in case.outputs:
        return None
    return float(np.abs(case.outputs[system].astype(np.float64) - case.outputs["ORT"]).max())


def table(cases: Iterable[Case], rounds: int) -> str:
    lines = [f"Median of {rounds} interleaved rounds, {THREADS} threads per system, times in ms.", "",
             "| model | batch | ours ms | ORT ms | torch ms | ours/ORT | ours/torch | max abs diff ours-ORT "
             "| max abs diff torch-ORT |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        ms = {s: _ms(case.times.get(s)) for s in SYSTEMS}
        lines.append(f"| {case.model} | {case.batch} | {_fmt(ms['ours'], '.2f')} | {_fmt(ms['ORT'], '.2f')} "
                     f"| {_fmt(ms['torch'], '.2f')} | {_fmt(_ratio(ms['ours'], ms['ORT']), '.2f')} "
                     f"| {_fmt(_ratio(ms['ours'], ms['torch']), '.2f')} | {_fmt(_diff(case, 'ours'), '.2e')} "
                     f"| {_fmt(_diff(case, 'torch'), '.2e')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (median reported)")
    parser.add_argument("--models", default=",".join(ZOO), help=f"comma-separated, from {','.join(ZOO)}")
    parser.add_argument("--batches", default="1,16", help="comma-separated batch sizes")
    args = parser.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(ZOO))
    if unknown or args.rounds < 1:
        parser.error(f"unknown models {unknown}" if unknown else "--rounds must be at least 1")
    batches = [int(b) for b in args.batches.split(",") if b]
    torch.set_num_threads(THREADS)

    cases = []
    for name in names:
        model = ZOO[name]()
        if model is None:
            print(f"note: {name} skipped: {EFFICIENTNET_LITE0} is absent")
            continue
        cases += [prepare(name, model, batch) for batch in batches]
    load_before = os.getloadavg()[0]
    run_rounds(cases, args.rounds)

    write_report(RESULTS, table(cases, args.rounds), load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
