"""`benchmark_lite`: time a `.ms` model or check its outputs, with MindSpore Lite's benchmark flags.

    benchmark_lite --modelFile=model.ms [--inDataFile=a.bin,b.bin] [--inputShapes=1,3,224,224:1,10]
                   [--loopCount=10] [--warmUpLoopCount=3] [--numThreads=2] [--timeProfiling] [--summary]
                   [--benchmarkDataFile=expected.out [--accuracyThreshold=0.5]]

Inputs are raw little-endian files in each graph input's dtype and layout (one per input, in input order), or
seeded uniform data in [0.1, 1.0) when `--inDataFile` is absent. `--inputShapes` Resizes the inputs first.

Performance mode (no `--benchmarkDataFile`): warm-up runs, then `loopCount` timed RunGraph calls, then
`Model = x.ms, NumThreads = n, MinRunTime = a ms, MaxRuntime = b ms, AvgRunTime = c ms`. With `--timeProfiling`
the timed runs go through RunGraph before/after callbacks, and per-node and per-op-type tables follow (sorted by
total time; avg(ms) is the time per inference, as in MindSpore Lite).

Accuracy mode: one run, then each output named in the expected data (MindSpore's text calibration format, a line
`<name> <rank> <dims...>` then a line of values per output; or `.npz` by output name; or `.npy` for a one-output
model) is compared with MindSpore Lite's `CompareData` (tools/benchmark/benchmark_base.h):

    an element is wrong when |out - exp| > 1e-8 + 1e-5 * |exp|; its error is
        |out - exp| / (|exp| + FLT_MIN)     or, where |exp| < FLT_EPSILON, |out - exp| (ignored when <= 1e-5);
    bias(tensor) = mean error over the wrong elements (0 when none is wrong);
    bias(all)    = mean of bias(tensor) over the compared outputs.

Both are printed x100 as `Mean bias of node/tensor <name> : x%` and `Mean bias of all nodes/tensors: x%`. The run
fails (non-zero status) when bias(all) exceeds `--accuracyThreshold` (in percent) or an output holds NaN or Inf.
"""
from __future__ import annotations

import math
import os
import sys
import time
import tokenize
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Sequence

import numpy as np

import lite
from lite.kernel import MODES
from lite.status import RET_ERROR, RET_OK, LiteError, ParamInvalidError
from lite.tools import Flag, UsageError, parse_flags, usage

PROG = "benchmark_lite"
RELATIVE_TOLERANCE = 1e-5
ABSOLUTE_TOLERANCE = 1e-8
NEAR_ZERO_ERROR = 1e-5
RANDOM_RANGE = (0.1, 1.0)
SEED = 0

FLAGS = (
    Flag("modelFile", "the .ms model to run"),
    Flag("inDataFile", "raw input files, comma-separated, one per graph input (default: seeded random data)"),
    Flag("benchmarkDataFile", "expected outputs (MindSpore calibration text, .npz or .npy): accuracy mode"),
    Flag("accuracyThreshold", "largest accepted mean bias of all outputs, in percent", float, 0.5),
    Flag("loopCount", "timed runs", int, 10),
    Flag("warmUpLoopCount", "untimed runs before the timed ones", int, 3),
    Flag("numThreads", "threads of the session", int, 2),
    Flag("inputShapes", "Resize the inputs first, e.g. 1,3,224,224:1,10 (one shape per input)"),
    Flag("kernels", "kernel family: compiled (from the ahead-of-time library, else numba) when available (auto), "
         "or forced", str, "auto", MODES),
    Flag("timeProfiling", "print per-node and per-op-type time tables", bool, False),
    Flag("summary", "print what the model holds (python -m lite.inspect) before running it", bool, False),
    Flag("decryptKey", "the hex key of an encrypted model (converter_lite --encryptKey)"),
    Flag("dump", "dump the tensors of the first run: a MindSpore dump config (.json) or a folder "
         "(default: $MINDSPORE_DUMP_CONFIG)"),
    Flag("enableFp16", "prefer float16 kernels (accepted; float32 is used)", bool, False),
    Flag("cpuBindMode", "0 NO_BIND, 1 HIGHER_CPU, 2 MID_CPU (accepted; threads are not pinned)", int, 1,
         ("0", "1", "2")),
)


# ---- inputs ------------------------------------------------------------------------------------------------
def parse_shapes(text: str) -> list[list[int]]:
    """`1,3,224,224:1,10` -> [[1, 3, 224, 224], [1, 10]]."""
    try:
        return [[int(d) for d in item.split(",")] for item in text.split(":")]
    except ValueError:
        raise UsageError(f"--inputShapes={text}: expected shapes like 1,3,224,224:1,10") from None


def read_input_file(path: str, tensor: lite.MSTensor) -> np.ndarray:
    """A raw little-endian file as the tensor's data; its size must be the tensor's byte size."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise ParamInvalidError(f"cannot read input file '{path}': {e.strerror}") from e
    if len(raw) != tensor.Size():
        raise ParamInvalidError(f"input file '{path}' has {len(raw)} bytes, but input '{tensor.tensor_name()}' "
                                f"{tensor.shape()} needs {tensor.Size()}")
    dtype = tensor.MutableData().dtype
    return np.frombuffer(raw, dtype.newbyteorder("<")).astype(dtype).reshape(tensor.shape())


def random_input(tensor: lite.MSTensor, rng: np.random.Generator) -> np.ndarray:
    """Uniform data in [0.1, 1.0) for float inputs, 0 or 1 for the others (MindSpore's random inputs)."""
    array = tensor.MutableData()
    if np.issubdtype(array.dtype, np.floating):
        return rng.uniform(*RANDOM_RANGE, array.shape).astype(array.dtype)
    return rng.integers(0, 2, array.shape).astype(array.dtype)


def load_inputs(session: lite.LiteSession, files: str | None) -> None:
    """Fill every graph input from its file (`files` is comma-separated, in input order) or with random data."""
    inputs = session.GetInputs()
    if files is None:
        rng = np.random.default_rng(SEED)
        for tensor in inputs:
            tensor.set_data(random_input(tensor, rng))
        return
    paths = [p for p in files.split(",") if p]
    if len(paths) != len(inputs):
        raise ParamInvalidError(f"--inDataFile names {len(paths)} files, but the model has {len(inputs)} inputs")
    for path, tensor in zip(paths, inputs):
        tensor.set_data(read_input_file(path, tensor))


# ---- expected outputs --------------------------------------------------------------------------------------
def parse_calibration(text: str, path: str) -> dict[str, np.ndarray]:
    """MindSpore's calibration text: per output a line `<name> <rank> <dims...>`, then a line of values."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) % 2:
        raise ParamInvalidError(f"'{path}': expected pairs of lines (header, values), got {len(lines)} lines")
    expected = {}
    for header, values in zip(lines[::2], lines[1::2]):
        try:
            name, rank_text, *dims = header.split()
            rank, shape = int(rank_text), tuple(int(d) for d in dims)
            data = np.array(values.split(), np.float64)
        except ValueError:
            raise ParamInvalidError(f"'{path}': malformed calibration entry '{header}'") from None
        if rank != len(shape) or data.size != math.prod(shape):
            raise ParamInvalidError(f"'{path}': output '{name}' declares rank {rank} and dims {list(shape)} "
                                    f"but has {data.size} values")
        expected[name] = data.reshape(shape)
    return expected


def load_expected(path: str, output_names: list[str]) -> dict[str, np.ndarray]:
    """Expected outputs by name from calibration text, `.npz` (keys = output names) or `.npy` (one output)."""
    try:
        if path.endswith(".npz"):
            with np.load(path) as archive:
                return {name: archive[name] for name in archive.files}
        if path.endswith(".npy"):
            if len(output_names) != 1:
                raise ParamInvalidError(f"'{path}' holds one array but the model has outputs {output_names}: "
                                        f"use .npz or the calibration text format")
            return {output_names[0]: np.load(path)}
        with open(path) as f:
            return parse_calibration(f.read(), path)
    except OSError as e:
        raise ParamInvalidError(f"cannot read benchmark data file '{path}': {e.strerror or e}") from e
    except (ValueError, EOFError, tokenize.TokenError, zipfile.BadZipFile, NotImplementedError,
            RuntimeError, zlib.error) as e:        # numpy's header parse; zipfile: unknown versions, encryption
        raise ParamInvalidError(f"'{path}' is not a valid benchmark data file: {e}") from e


def mean_bias(actual: np.ndarray, expected: np.ndarray) -> float:
    """MindSpore Lite's mean relative error of the elements outside tolerance (a fraction; see the module doc)."""
    out, exp = actual.astype(np.float64).ravel(), expected.astype(np.float64).ravel()
    error = np.abs(out - exp)
    wrong = error > ABSOLUTE_TOLERANCE + RELATIVE_TOLERANCE * np.abs(exp)
    near_zero = np.abs(exp) < np.finfo(np.float32).eps
    relative = error / (np.abs(exp) + np.finfo(np.float32).tiny)
    counted = wrong & (~near_zero | (error > NEAR_ZERO_ERROR))
    errors = np.where(near_zero, error, relative)[counted]
    return float(errors.mean()) if errors.size else 0.0


def compare_outputs(session: lite.LiteSession, expected: dict[str, np.ndarray], threshold: float) -> None:
    """Print the per-output and overall mean bias (percent); raise LiteError beyond `threshold` or on NaN/Inf."""
    biases = []
    for name, exp in expected.items():
        tensor = session.GetOutputByTensorName(name)
        if tensor is None:
            raise ParamInvalidError(f"'{name}' is not an output of the model (outputs: "
                                    f"{session.GetOutputTensorNames()})")
        out = tensor.MutableData()
        if list(out.shape) != list(exp.shape):
            raise LiteError(f"output '{name}' has shape {list(out.shape)} but the expected data {list(exp.shape)}")
        for what, data in (("output tensor", out), ("expected data of", exp)):
            if not np.isfinite(data).all():
                raise LiteError(f"{what} '{name}' has NaN or Inf values: compare failed")
        biases.append(mean_bias(out, exp))
        print(f"Mean bias of node/tensor {name} : {biases[-1] * 100:g}%")
    total = float(np.mean(biases)) * 100 if biases else 0.0
    print(f"Mean bias of all nodes/tensors: {total:g}%")
    if total > threshold:
        raise LiteError(f"Mean bias of all nodes/tensors is too big: {total:g}% > --accuracyThreshold={threshold:g}%")


# ---- timing ------------------------------------------------------------------------------------------------
@dataclass
class OpTime:
    calls: int = 0
    total_ms: float = 0.0


class OpTimer:
    """RunGraph callbacks accumulating each node's wall time and call count by node name and by op type."""

    def __init__(self) -> None:
        self.by_name: dict[str, OpTime] = {}
        self.by_type: dict[str, OpTime] = {}
        self._start = 0.0

    def before(self, inputs: list, outputs: list, param: lite.CallBackParam) -> bool:
        self._start = time.perf_counter()
        return True

    def after(self, inputs: list, outputs: list, param: lite.CallBackParam) -> bool:
        ms = (time.perf_counter() - self._start) * 1e3
        for table, key in ((self.by_name, param.node_name), (self.by_type, param.node_type)):
            entry = table.setdefault(key, OpTime())
            entry.calls += 1
            entry.total_ms += ms
        return True


def profile_table(title: str, times: dict[str, OpTime], loops: int) -> str:
    """A text table of `times`, slowest first: ms per inference, share of all op time, calls, total ms."""
    grand = sum(t.total_ms for t in times.values()) or 1.0
    rows = [(title, "avg(ms)", "percent", "calledTimes", "opTotalTime")]
    rows += [(key, f"{t.total_ms / loops:.6f}", f"{100 * t.total_ms / grand:.2f}%", str(t.calls), f"{t.total_ms:.6f}")
             for key, t in sorted(times.items(), key=lambda kv: -kv[1].total_ms)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["-" * (sum(widths) + 2 * len(widths))]
    lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def time_runs(session: lite.LiteSession, loops: int, warm_up: int, timer: OpTimer | None) -> list[float]:
    """Milliseconds of each of `loops` RunGraph calls after `warm_up` untimed ones (through `timer`'s callbacks
    when given)."""
    for _ in range(warm_up):
        session.RunGraph()
    callbacks = (timer.before, timer.after) if timer else ()
    times = []
    for _ in range(loops):
        start = time.perf_counter()
        session.RunGraph(*callbacks)
        times.append((time.perf_counter() - start) * 1e3)
    return times


# ---- the tool ----------------------------------------------------------------------------------------------
def _check(opts: SimpleNamespace) -> None:
    if not opts.modelFile:
        raise UsageError("--modelFile is required")
    for name, least in (("loopCount", 1), ("numThreads", 1), ("warmUpLoopCount", 0)):
        if getattr(opts, name) < least:
            raise UsageError(f"--{name}={getattr(opts, name)} must be at least {least}")


def open_session(opts: SimpleNamespace) -> lite.LiteSession:
    """Load (mmap), compile with the flags' context, Resize if asked, and fill the inputs."""
    device = lite.CpuDeviceInfo(enable_float16=opts.enableFp16, cpu_bind_mode=lite.CpuBindMode(opts.cpuBindMode))
    context = lite.Context(thread_num=opts.numThreads,
                           device_list=[lite.DeviceContext(lite.DeviceType.DT_CPU, device)], kernels=opts.kernels)
    start = time.perf_counter()
    session = lite.LiteSession.CreateSession(context)
    session.CompileGraph(lite.Model.Load(opts.modelFile, dec_key=opts.decryptKey))
    if opts.inputShapes:        # before the first plan of a model whose input dims are unknown
        shapes = parse_shapes(opts.inputShapes)
        inputs = session.GetInputs()
        if len(shapes) != len(inputs):
            raise UsageError(f"--inputShapes gives {len(shapes)} shapes, but the model has {len(inputs)} inputs")
        session.Resize(inputs, shapes)
    print(kernel_line(session, time.perf_counter() - start))
    load_inputs(session, opts.inDataFile)
    return session


def kernel_line(session: lite.LiteSession, seconds: float) -> str:
    """Which kernels run, how many nodes bound a compiled one, and what compiling the session cost."""
    from lite.kernel import describe_backend as describe
    steps = session._require_compiled().steps
    count = sum(step.kernel.compiled for step in steps)
    return (f"Kernels: {describe(session.context.kernels)}; {count} of {len(steps)} nodes run compiled code; session created in "
            f"{seconds:.3f} s ({session.jit_seconds:.3f} s compiling or loading kernels)")


def dump_first_run(session: lite.LiteSession, target: str) -> None:
    """One run with its tensors dumped (`lite.dump`): as the JSON config says, or statistics into a folder."""
    from lite.dump import Dump
    dump = Dump.from_config(target) if target.endswith(".json") else Dump(target)
    with dump:
        dump.run(session)
    print(f"Dumped the tensors of one run to {dump.path}")


def run(opts: SimpleNamespace) -> None:
    """Accuracy mode when `--benchmarkDataFile` is given, else performance mode (see the module doc)."""
    _check(opts)
    if opts.summary:
        from lite.inspect import format_summary, summarize
        model = lite.Model.Load(opts.modelFile, dec_key=opts.decryptKey)
        print(format_summary(summarize(model, os.path.getsize(opts.modelFile))))
    session = open_session(opts)
    dump_target = opts.dump or os.environ.get("MINDSPORE_DUMP_CONFIG")
    if dump_target:
        dump_first_run(session, dump_target)
    if opts.benchmarkDataFile:
        session.RunGraph()
        compare_outputs(session, load_expected(opts.benchmarkDataFile, session.GetOutputTensorNames()),
                        opts.accuracyThreshold)
        return
    timer = OpTimer() if opts.timeProfiling else None
    times = time_runs(session, opts.loopCount, opts.warmUpLoopCount, timer)
    if timer:
        print(profile_table("opName", timer.by_name, opts.loopCount))
        print(profile_table("opType", timer.by_type, opts.loopCount))
    print(f"Model = {os.path.basename(opts.modelFile)}, NumThreads = {opts.numThreads}, "
          f"MinRunTime = {min(times):f} ms, MaxRuntime = {max(times):f} ms, "
          f"AvgRunTime = {sum(times) / len(times):f} ms")


def _fail(error: LiteError, model: str) -> int:
    print(f"ERROR: {error}", file=sys.stderr)
    if isinstance(error, UsageError):
        print(usage(PROG, FLAGS), file=sys.stderr)
    print(f"Run Benchmark {model} Failed : {error.status}", file=sys.stderr)
    return error.status or RET_ERROR


def main(argv: Sequence[str] | None = None) -> int:
    """The `benchmark_lite` entry point: returns the MindSpore status (0 on success)."""
    try:
        opts = parse_flags(sys.argv[1:] if argv is None else argv, FLAGS)
    except UsageError as e:
        return _fail(e, "")
    if opts.help:
        print(usage(PROG, FLAGS))
        return RET_OK
    model = os.path.basename(opts.modelFile or "")
    try:
        run(opts)
    except LiteError as e:
        return _fail(e, model)
    print(f"Run Benchmark {model} Success.")
    return RET_OK


if __name__ == "__main__":
    sys.exit(main())
