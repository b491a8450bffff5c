"""Inference latency of this runtime, onnxruntime and PyTorch eager, side by side on the same ONNX models.

    python bench/bench_inference.py [--rounds 7] [--process-rounds 3] [--models lenet5,resnet50,mobilenet_v2,
                                    efficientnet_lite0] [--batches 1,16] [--int8 mobilenet_v2,efficientnet_lite0]
                                    [--modes process,back-to-back,idle] [--peers mslite]

Every system gets 2 threads: our session `Context(thread_num=2)` (compiled kernels when numba is installed: the
machine line says which ran); onnxruntime with 2 intra-op threads, 1 inter-op thread, ORT_ENABLE_ALL and
`session.intra_op.allow_spinning=0`; PyTorch eager (`tests.oracles.torch_reference.to_torch`) with
`torch.set_num_threads(2)`, `torch.inference_mode()` and OMP_WAIT_POLICY=PASSIVE (set before torch loads, unless
already set; every worker process also inherits the GOMP_SPINCOUNT that importing `lite` sets, so torch's OpenMP
workers spin as briefly as ours). Int8 rows: our PTQ model (`converter.quant`, MAX_MIN) against onnxruntime's `quantize_static` (QDQ,
per-channel int8 weights, int8 activations) of the same float model, both calibrated on the same 4 random inputs
(latency only; `bench_quant.py` measures accuracy). Files are converted once, before any timing.

Peer (`--peers mslite`, on when it can be had): the real MindSpore Lite 2.0 C++ runtime ("MSLite", `bench/
mindspore_lite_peer/`), float32 only, on the MindIR its own converter makes of the same ONNX file (input kept
NCHW, batch 1, resized like ours), `Context` thread num 2. A native program, it is timed in the process mode only;
its output is compared with onnxruntime's like the others'. When its wheel cannot be downloaded or its program
cannot be built, one line says why and its column is left out.

Modes (`bench/harness.py`): **process** — each engine in its own fresh process (10 warm-up + 50 timed runs,
`--process-rounds` rounds, order rotating; the numbers that count), also giving the cold start (process start
-> first output, imports and session creation included, after one untimed process filled the on-disk caches);
**back-to-back** — interleaved rounds in this process, each timed call right after an untimed one; **idle** — the
same with 10 ms of sleep before each timed call. Every output is compared with onnxruntime's (max abs
difference). The report is printed and written atomically to `bench/results/inference.md`.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # read once, when torch loads libgomp
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402

import harness  # noqa: E402

if TYPE_CHECKING:     # workers import only their own engine: onnx is loaded where a function needs it
    import onnx

THREADS = 2
WARMUP, RUNS = 10, 50
EFFICIENTNET_LITE0 = REPO.parent / "shared" / "models" / "efficientnet_lite0.onnx"
RESULTS = Path(__file__).resolve().parent / "results" / "inference.md"
SYSTEMS = ("ours", "ORT", "torch", "MSLite")
PROCESS_ONLY = ("MSLite",)          # native peers: no in-process runner, timed in their own process only
PEERS = ("mslite",)                 # --peers names
MODES = ("process", "back-to-back", "idle")
CALIBRATION_SAMPLES = 4

Runner = Callable[[np.ndarray], np.ndarray]


def free_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """The EfficientNet-Lite0 export with its batch unfixed: the input's dim 0 becomes symbolic and the head's
    `Reshape(x, [1, -1])` becomes `Reshape(x, [0, -1])` (keep dim 0), so every system can run batch 16."""
    import onnx
    from onnx import numpy_helper
    model = onnx.ModelProto.FromString(model.SerializeToString())
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"
    constants = {n.output[0]: n for n in model.graph.node if n.op_type == "Constant"}
    for node in model.graph.node:
        shape = constants.get(node.input[1]) if node.op_type == "Reshape" else None
        if shape is not None and numpy_helper.to_array(shape.attribute[0].t).tolist() == [1, -1]:
            shape.attribute[0].t.CopyFrom(numpy_helper.from_array(np.array([0, -1], np.int64)))
    return model


def zoo(name: str) -> onnx.ModelProto | None:
    import onnx

    import models
    if name == "efficientnet_lite0":
        return free_batch(onnx.load(EFFICIENTNET_LITE0)) if EFFICIENTNET_LITE0.exists() else None
    if name == "lenet5":
        return models.build("lenet5", num_classes=10, input_size=32, batch=None)
    return models.build(name, input_size=224, batch=None)


ZOO = ("lenet5", "resnet50", "mobilenet_v2", "efficientnet_lite0")


# ---- the systems: each builds a runner from its file --------------------------------------------------------------
def ours(path: str, shape: tuple[int, ...]) -> Runner:
    import lite
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=THREADS))
    session.CompileGraph(lite.Model.Load(path))
    tensor = session.GetInputs()[0]
    if tuple(tensor.shape()) != shape:
        session.Resize([tensor], [list(shape)])
        tensor = session.GetInputs()[0]
    output = next(iter(session.GetOutputs().values()))

    def run(x: np.ndarray) -> np.ndarray:
        tensor.set_data(x)
        session.RunGraph()
        return output.numpy()
    return run


def onnxruntime(path: str, shape: tuple[int, ...]) -> Runner:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = THREADS, 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    name, output = session.get_inputs()[0].name, session.get_outputs()[0].name
    return lambda x: session.run([output], {name: x})[0]


def pytorch(path: str, shape: tuple[int, ...]) -> Runner:
    import onnx
    import torch

    from tests.oracles.torch_reference import to_torch
    torch.set_num_threads(THREADS)
    module = to_torch(onnx.load(path)).eval()

    def run(x: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(x)).numpy()
    return run


BUILDERS: dict[str, Callable[[str, tuple[int, ...]], Runner]] = {"ours": ours, "ORT": onnxruntime,
                                                                  "torch": pytorch}


# ---- cases and their files -------------------------------------------------------------------------------------
@dataclass
class Case:
    """One (model, precision, batch): each system's file, and what the modes measured."""
    model: str
    precision: str
    batch: int
    shape: tuple[int, ...]
    files: dict[str, str]
    ms: dict[str, dict[str, float | None]] = field(default_factory=dict)    # mode -> system -> median ms
    cold: dict[str, float | None] = field(default_factory=dict)
    diff: dict[str, float | None] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.model} int8" if self.precision == "int8" else self.model


def feed(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)


def write_files(name: str, model: onnx.ModelProto, int8: bool, folder: Path) -> dict[str, dict[str, str]]:
    """Per precision, each system's file: ours `.ms` (batch 1, resized by the worker), the ONNX model for
    onnxruntime and PyTorch; int8: ours PTQ `.ms` and onnxruntime's QDQ model."""
    import onnx

    from converter import convert, to_graph
    from converter.export import to_bytes
    from converter.quant import QuantConfig, quantize
    input_name = model.graph.input[0].name
    one = input_shape(model, 1)
    onnx_path = folder / f"{name}.onnx"
    onnx.save(model, onnx_path)
    (folder / f"{name}.ms").write_bytes(convert(model, {input_name: list(one)}))
    files = {"float32": {"ours": str(folder / f"{name}.ms"), "ORT": str(onnx_path), "torch": str(onnx_path)}}
    if int8:
        calib = [np.random.default_rng(100 + k).standard_normal(one).astype(np.float32)
                 for k in range(CALIBRATION_SAMPLES)]
        graph = to_graph(model, {input_name: list(one)})
        quantized = quantize(graph, QuantConfig(method="MAX_MIN"), [{input_name: x} for x in calib])
        (folder / f"{name}_int8.ms").write_bytes(to_bytes(quantized))
        (folder / f"{name}_qdq.onnx").write_bytes(ort_qdq(onnx_path, input_name, calib, folder))
        files["int8"] = {"ours": str(folder / f"{name}_int8.ms"), "ORT": str(folder / f"{name}_qdq.onnx")}
    return files


def ort_qdq(onnx_path: Path, input_name: str, calib: list[np.ndarray], folder: Path) -> bytes:
    """onnxruntime's quantize_static: QDQ, per-channel int8 weights, int8 activations, MinMax."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(calib)

        def get_next(self):
            x = next(self.items, None)
            return None if x is None else {input_name: x}

    dst = folder / f"{onnx_path.stem}_qdq_tmp.onnx"
    quantize_static(str(onnx_path), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    return dst.read_bytes()


def input_shape(model: onnx.ModelProto, batch: int) -> tuple[int, ...]:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    return (batch, *(d.dim_value for d in dims[1:]))


# ---- the modes -------------------------------------------------------------------------------------------------
def in_process(cases: list[Case], rounds: int, modes: list[str]) -> None:
    """back-to-back and idle: every system of every case in this process; outputs compared with onnxruntime."""
    for case in cases:
        x = feed(case.shape)
        runners, outputs = {}, {}
        for system, path in case.files.items():
            try:
                if system in PROCESS_ONLY:
                    outputs[system] = peer_output(case)
                    continue
                runners[system] = BUILDERS[system](path, case.shape)
                outputs[system] = runners[system](x)
            except Exception as e:   # a missing kernel or op must not stop the other measurements
                print(f"note: {system} cannot run {case.label} batch {case.batch}: {type(e).__name__}: "
                      f"{e}".splitlines()[0])
        calls = {s: (lambda r=r: r(x)) for s, r in runners.items()}
        for mode in modes:
            gap = harness.IDLE_GAP if mode == "idle" else 0.0
            times = harness.interleaved(calls, rounds, gap)
            case.ms[mode] = {s: harness.median(t) for s, t in times.items()}
        for system, out in outputs.items():
            if "ORT" in outputs and system != "ORT":
                case.diff[system] = float(np.abs(out.astype(np.float64) - outputs["ORT"]).max())
        print(f"{case.label} batch {case.batch}: in-process modes done", flush=True)


def worker_argv(system: str, case: Case) -> list[str]:
    if system == "MSLite":
        return harness.Native(peer_argv(case, WARMUP, RUNS))
    return [str(Path(__file__).resolve()), "--worker", system, "--file", case.files[system],
            "--shape", ",".join(map(str, case.shape))]


# ---- the MindSpore Lite peer -------------------------------------------------------------------------------------
def peer_program(wanted: bool) -> Path | None:
    """The peer's program, fetched and built on first use; None, with one line saying why, when it cannot be."""
    if not wanted:
        return None
    from mindspore_lite_peer import peer    # here, not at the top: the Python workers' cold start stays theirs
    try:
        return peer.binary()
    except (peer.Unavailable, OSError, subprocess.SubprocessError) as e:
        print(f"note: MindSpore Lite peer left out: {e}")
        return None


def add_peer(files: dict[str, str], program: Path, name: str, model: onnx.ModelProto) -> None:
    """MindSpore Lite's own conversion of the float32 ONNX file (batch 1; the program resizes, as ours does)."""
    from mindspore_lite_peer import peer
    source = Path(files["ORT"])
    plain = without_unit_pool_dilations(model)
    if plain is not model:
        import onnx
        source = source.with_name(f"{name}_mslite.onnx")
        onnx.save(plain, source)
    try:
        files["MSLite"] = str(peer.convert(program, source, model.graph.input[0].name, input_shape(model, 1)))
    except (RuntimeError, OSError, subprocess.SubprocessError) as e:
        print(f"note: MSLite cannot convert {name}: {e}")


def without_unit_pool_dilations(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model`, or a copy without the pooling nodes' `dilations` attributes that are all ones (the default):
    MindSpore Lite 2.0's ONNX parser rejects any pooling `dilations` ("pooling op not support dilations now"),
    and PyTorch's export writes [1, 1] into ResNet-50's MaxPool."""
    def unit(node: onnx.NodeProto, attr: onnx.AttributeProto) -> bool:
        return node.op_type in ("MaxPool", "AveragePool") and attr.name == "dilations" and set(attr.ints) == {1}
    if not any(unit(n, a) for n in model.graph.node for a in n.attribute):
        return model
    import onnx
    plain = onnx.ModelProto.FromString(model.SerializeToString())
    for node in plain.graph.node:
        kept = [a for a in node.attribute if not unit(node, a)]
        del node.attribute[:]
        node.attribute.extend(kept)
    return plain


def peer_argv(case: Case, warmup: int, runs: int) -> list[str]:
    """The peer's run on this case's input (`feed`, written next to its model once): it writes its output."""
    from mindspore_lite_peer import peer
    mindir = Path(case.files["MSLite"])
    x_path, y_path = (mindir.with_name(f"{mindir.stem}_{case.batch}.{kind}") for kind in ("in", "out"))
    if not x_path.exists():
        feed(case.shape).tofile(x_path)
    return peer.run_argv(peer.binary(), str(mindir), x_path, case.shape, warmup, runs, y_path)


def peer_output(case: Case) -> np.ndarray:
    """One run of the peer (no warm-up, no timing), its output for the comparison with onnxruntime's."""
    from mindspore_lite_peer import peer
    argv = peer_argv(case, 0, 0)
    result = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(peer.last_line(result.stderr))
    return np.fromfile(argv[-1], np.float32).reshape(case.shape[0], -1)


def own_processes(cases: list[Case], rounds: int) -> None:
    for case in cases:
        result = harness.own_process_rounds({s: worker_argv(s, case) for s in case.files}, rounds)
        case.ms["process"] = {s: harness.median(r["ms"]) for s, r in result.items()}
        case.cold = {s: harness.median(r["cold_ms"]) for s, r in result.items()}
        print(f"{case.label} batch {case.batch}: own-process mode done", flush=True)


def worker(system: str, path: str, shape: tuple[int, ...]) -> None:
    """One system in this fresh process: build, first output (the cold start's end), warm-up, timed runs."""
    runner = BUILDERS[system](path, shape)
    x = feed(shape)
    runner(x)
    first = time.time()
    harness.report_from_worker(first, harness.time_in_process(lambda: runner(x), WARMUP, RUNS))


# ---- the report --------------------------------------------------------------------------------------------------
def mode_table(cases: list[Case], mode: str) -> str:
    systems = [s for s in SYSTEMS if any(s in c.files for c in cases) and (mode == "process" or s not in PROCESS_ONLY)]
    peers = [s for s in systems if s in PROCESS_ONLY]
    header = ["model", "batch", *(f"{s} ms" for s in systems), "ours/ORT", "ours/torch", *(f"ours/{s}" for s in peers)]
    if mode == "process":
        header += [f"cold start {s} ms" for s in systems]
    rows = []
    for case in cases:
        ms = case.ms.get(mode, {})
        row = [case.label, str(case.batch), *(harness.fmt(ms.get(s), ".2f") for s in systems),
               harness.fmt(harness.ratio(ms.get("ours"), ms.get("ORT")), ".2f"),
               harness.fmt(harness.ratio(ms.get("ours"), ms.get("torch")), ".2f"),
               *(harness.fmt(harness.ratio(ms.get("ours"), ms.get(s)), ".2f") for s in peers)]
        if mode == "process":
            row += [harness.fmt(case.cold.get(s), ".0f") for s in systems]
        rows.append(row)
    return harness.markdown(header, rows, "lr" + "r" * (len(header) - 2))


def report(cases: list[Case], modes: list[str], rounds: int, process_rounds: int) -> str:
    titles = {"process": f"Each engine in its own fresh process ({WARMUP} warm-up + {RUNS} timed runs, median of "
                         f"{process_rounds} rounds; the numbers that count)",
              "back-to-back": f"One process, back-to-back (median of {rounds} interleaved rounds)",
              "idle": f"One process, {harness.IDLE_GAP * 1e3:.0f} ms idle before each timed run (median of "
                      f"{rounds} interleaved rounds)"}
    parts = [f"{THREADS} threads per system, times in ms."]
    if any("MSLite" in c.files for c in cases):
        parts[0] += (" MSLite: the MindSpore Lite 2.0.0 C++ runtime (PyPI wheel) on its own converter's MindIR, "
                     "float32, timed in its own process only.")
    for mode in modes:
        parts += [f"**{titles[mode]}**", mode_table(cases, mode)]
    compared = ["ours", "torch", *(s for s in PROCESS_ONLY if any(s in c.diff for c in cases))]
    diffs = [[c.label, str(c.batch), *(harness.fmt(c.diff.get(s), ".2e") for s in compared)] for c in cases if c.diff]
    if diffs:
        parts += ["**Max abs difference from onnxruntime's output**",
                  harness.markdown(["model", "batch", *compared], diffs, "lr" + "r" * len(compared))]
    return "\n\n".join(parts)


def versions(with_peer: bool) -> dict[str, str]:
    import onnxruntime
    import torch

    from mindspore_lite_peer import peer
    return {"onnxruntime": onnxruntime.__version__, "torch": torch.__version__,
            **({"MindSpore Lite": f"{peer.VERSION} (C++)"} if with_peer else {})}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds of the in-process modes")
    parser.add_argument("--process-rounds", type=int, default=3, help="fresh processes per system and case")
    parser.add_argument("--models", default=",".join(ZOO), help=f"comma-separated, from {','.join(ZOO)}")
    parser.add_argument("--batches", default="1,16", help="comma-separated batch sizes")
    parser.add_argument("--int8", default="mobilenet_v2,efficientnet_lite0", help="models with int8 rows too")
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {','.join(MODES)}")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers, added where they can be "
                        "had: mslite (the MindSpore Lite 2.0 C++ runtime); empty for none")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--shape", help=argparse.SUPPRESS)
    parser.add_argument("--spawned-at", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker, args.file, tuple(int(d) for d in args.shape.split(",")))
        return 0
    names = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    peers = [p for p in args.peers.split(",") if p]
    unknown = sorted(set(names) - set(ZOO)) + sorted(set(modes) - set(MODES)) + sorted(set(peers) - set(PEERS))
    if unknown or args.rounds < 1 or args.process_rounds < 1:
        parser.error(f"unknown models, modes or peers {unknown}" if unknown else "rounds must be at least 1")
    batches = [int(b) for b in args.batches.split(",") if b]
    int8 = set(args.int8.split(",")) if args.int8 else set()
    program = peer_program("mslite" in peers)
    with tempfile.TemporaryDirectory() as tmp:
        cases = []
        for name in names:
            model = zoo(name)
            if model is None:
                print(f"note: {name} skipped: {EFFICIENTNET_LITE0} is absent")
                continue
            files = write_files(name, model, name in int8, Path(tmp))
            if program is not None:
                add_peer(files["float32"], program, name, model)
            for precision, files_of in files.items():
                cases += [Case(name, precision, b, input_shape(model, b), files_of) for b in batches]
        load_before = os.getloadavg()[0]
        if "process" in modes:
            own_processes(cases, args.process_rounds)
        in_process(cases, args.rounds, [m for m in modes if m != "process"])
        body = report(cases, modes, args.rounds, args.process_rounds)
    harness.write_report(RESULTS, body, load_before, versions(program is not None))
    return 0


if __name__ == "__main__":
    sys.exit(main())
