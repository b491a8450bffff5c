"""Every `.tflite` file of the `mediapipe` wheel through `converter_lite --fmk=TFLITE` and our runtime, compared
with LiteRT running the original: the per-file table of `docs/tflite.md`.

    python bench/bench_mediapipe.py

The files are read from an installed `mediapipe` wheel without importing it (`pip install --no-deps
mediapipe==0.10.14`). Each graph input is fed uniform random values in [-1, 1] (seed 0). The oracle is LiteRT's
Interpreter with its builtin kernels only; a file using a custom op that only LiteRT's XNNPACK delegate runs
(MediaPipe's Convolution2DTransposeBias) is run with the delegate instead, and the table says so. A file matches
when every output is within 1e-4 of that output's range (max |ours - LiteRT| / (max - min of LiteRT's)). Where an
output is not, the table also gives how far LiteRT's XNNPACK delegate is from its builtin kernels on that output
(LiteRT's own spread: an ill-conditioned output, such as a segmentation logit map, differs between LiteRT's two
CPU backends as much); a file we refuse shows the converter's reason. LiteRT has no kernel for
face_landmark_with_attention's transform ops: that file is compared with MediaPipe's own runtime instead, on the
photo crop its recorded outputs are of (`tests/converter/frontends/tflite/mediapipe_face_oracle.py`). Written
atomically to `bench/results/mediapipe_models.md`.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

import harness  # noqa: E402
import lite  # noqa: E402
from converter import convert_tflite  # noqa: E402
from converter.frontends.tflite.reader import read_model  # noqa: E402
from lite.status import LiteError  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "mediapipe_models.md"
TOLERANCE = 1e-4
THREADS = 2
SPREAD = "within LiteRT's own spread"
# files whose ops LiteRT cannot run -> the crop MediaPipe's own runtime was recorded on
RECORDED = {"modules/face_landmark/face_landmark_with_attention.tflite": "upright"}
MEDIAPIPE = "MediaPipe (recorded)"


@dataclass
class Result:
    file: str
    kb: int
    custom_ops: list[str]
    oracle: str = ""
    errors: list[float] | None = None      # per output, relative to LiteRT's output range
    spread: list[float] | None = None      # per output, LiteRT XNNPACK against LiteRT builtin, the same way
    refused: str = ""
    ours_ms: float | None = None
    litert_ms: float | None = None

    @property
    def verdict(self) -> str:
        if self.refused:
            return "refused"
        if max(self.errors, default=0.0) <= TOLERANCE:
            return "matches"
        within = self.spread is not None and all(e <= max(TOLERANCE, s) for e, s in zip(self.errors, self.spread))
        return SPREAD if within else "differs"


def wheel_models() -> tuple[Path, list[Path]]:
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the mediapipe wheel is not installed (pip install --no-deps mediapipe==0.10.14)")
    root = Path(list(spec.submodule_search_locations)[0])
    return root, sorted(root.rglob("*.tflite"))


RESOLVERS = {"builtin": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES, "XNNPACK": OpResolverType.AUTO}


def litert(data: bytes, feeds: list[np.ndarray], names: tuple[str, ...] = tuple(RESOLVERS)
           ) -> tuple[str, list[np.ndarray], float]:
    """LiteRT's outputs, which resolver (the first of `names` that can) ran them and the time of one run (ms,
    after one warm-up)."""
    for name in names:
        resolver = RESOLVERS[name]
        try:
            interpreter = Interpreter(model_content=data, num_threads=THREADS, experimental_op_resolver_type=resolver)
            interpreter.allocate_tensors()
        except RuntimeError:
            continue              # an unresolved custom op: the delegate may have it
        for detail, x in zip(interpreter.get_input_details(), feeds):
            interpreter.set_tensor(detail["index"], x)
        interpreter.invoke()
        start = time.perf_counter()
        interpreter.invoke()
        elapsed = (time.perf_counter() - start) * 1e3
        return name, [interpreter.get_tensor(d["index"]).copy() for d in interpreter.get_output_details()], elapsed
    raise RuntimeError("LiteRT cannot run it")


def ours(data: bytes, feeds: list[np.ndarray]) -> tuple[list[np.ndarray], float]:
    buf = convert_tflite(data)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS))
    for tensor, x in zip(session.GetInputs(), feeds):
        tensor.set_data(x)
    session.RunGraph()
    start = time.perf_counter()
    session.RunGraph()
    elapsed = (time.perf_counter() - start) * 1e3
    return [t.numpy().copy() for t in session.GetOutputs().values()], elapsed


def relative(actual: np.ndarray, expected: np.ndarray) -> float:
    if actual.shape != expected.shape:
        return float("inf")
    span = float(expected.max() - expected.min()) if expected.size else 0.0
    diff = float(np.abs(actual.astype(np.float64) - expected).max(initial=0.0))
    return diff / span if span else diff


def recorded(crop: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The input (a crop of scikit-image's astronaut photo, in [0, 1]) and MediaPipe's outputs recorded on it."""
    import skimage.data
    from tests.converter.frontends.tflite.mediapipe_face_oracle import CROPS, FIXTURE, crop as cut
    box = next(c[1:] for c in CROPS if c[0] == crop)
    reference = np.load(FIXTURE)
    outputs = sorted((k for k in reference.files if k.startswith(f"{crop}/")), key=lambda k: int(k.split("/")[1]))
    return [cut(skimage.data.astronaut(), *box)[None].astype(np.float32) / 255], [reference[k] for k in outputs]


def measure(root: Path, path: Path) -> Result:
    data = path.read_bytes()
    record = read_model(data, path.name)
    custom = sorted({op.op.partition(":")[2] for g in record.graphs for op in g.operators
                     if op.op.startswith("CUSTOM:")})
    result = Result(str(path.relative_to(root)), len(data) // 1024, custom)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(-1, 1, record.tensors[i].shape).astype(record.tensors[i].dtype) for i in record.inputs]
    try:
        actual, result.ours_ms = ours(data, feeds)
    except LiteError as e:
        result.refused = str(e).splitlines()[0]
        return result
    if result.file in RECORDED:
        feeds, expected = recorded(RECORDED[result.file])
        actual, result.ours_ms = ours(data, feeds)
        result.oracle = MEDIAPIPE
        result.errors = [relative(a.ravel(), e) for a, e in zip(actual, expected)]
        return result
    try:
        result.oracle, expected, result.litert_ms = litert(data, feeds)
    except RuntimeError as e:
        result.refused = f"LiteRT cannot run it either: {str(e).splitlines()[0]}"
        return result
    result.errors = [relative(a, e) for a, e in zip(actual, expected)]
    if len(actual) != len(expected):
        result.errors.append(float("inf"))
    if max(result.errors) > TOLERANCE and result.oracle == "builtin":
        delegated = litert(data, feeds, ("XNNPACK",))[1]
        result.spread = [relative(d, e) for d, e in zip(delegated, expected)]
    return result


def table(results: list[Result]) -> str:
    rows = []
    for r in results:
        errors = ", ".join(f"{e:.1e}" for e in r.errors) if r.errors is not None else ""
        spread = ", ".join(f"{e:.1e}" for e in r.spread) if r.spread is not None else ""
        why = r.refused.replace("|", "\\|") if r.refused else ""
        rows.append([f"`{r.file}`", str(r.kb), ", ".join(r.custom_ops) or "-", r.verdict, r.oracle or "-",
                     errors or "-", spread or "-", harness.fmt(r.ours_ms, ".1f"), harness.fmt(r.litert_ms, ".1f"),
                     why or "-"])
    counts = Counter(r.verdict for r in results)
    head = (f"{len(results)} files: {counts['matches']} match their reference within {TOLERANCE:g} of each output's "
            f"range (LiteRT; MediaPipe's own runtime where LiteRT cannot run the ops), "
            f"{counts[SPREAD]} only within LiteRT's own spread, {counts['differs']} differ, {counts['refused']} "
            f"refused. Inputs uniform in "
            f"[-1, 1] (seed 0; a photo crop for a recorded reference), {THREADS} threads; one timed run after a warm-up "
            f"(ms, indicative).\n\n")
    return head + harness.markdown(["file", "KB", "custom ops", "result", "reference", "max diff per output "
                                    "(of range)", "LiteRT XNNPACK vs builtin", "ours ms", "LiteRT ms",
                                    "refused because"], rows, "lrlllrrrrl")


def main() -> None:
    load_before = os.getloadavg()[0]
    root, files = wheel_models()
    results = []
    for path in files:
        results.append(measure(root, path))
        print(f"{results[-1].file}: {results[-1].verdict} {results[-1].errors or results[-1].refused}", flush=True)
    harness.write_report(RESULTS, f"mediapipe {version('mediapipe')}: every `.tflite` file of the wheel.\n\n"
                         + table(results), load_before, {"ai-edge-litert": version("ai-edge-litert")})


if __name__ == "__main__":
    main()
