"""Latency of `.tflite` models converted with `converter_lite --fmk=TFLITE`, next to LiteRT running the originals.

    python bench/bench_tflite.py [--rounds 7] [--models face_detection_short_range,hand_landmark_lite,...]

Models: MediaPipe 0.10's solution models, read from an installed `mediapipe` wheel without importing it
(`pip install --no-deps mediapipe==0.10.14`); absent models are skipped with a note. Every system gets 2 threads:
our session `Context(thread_num=2)`; LiteRT's `Interpreter(num_threads=2)` twice, with its default XNNPACK
delegate and with its builtin kernels only (the oracle of the tests). Rounds are interleaved exactly as in
`bench_inference.py` (`run_rounds`: each timed call right after an untimed one of the same system, the systems'
order rotating); the table gives medians, and each system's outputs are compared with LiteRT's builtin kernels
(max difference relative to each output's range). Printed and written atomically to `bench/results/tflite.md`.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

import lite  # noqa: E402
from bench_inference import Case, Runner, _fmt, _ms, _ratio, run_rounds, write_report  # noqa: E402
from converter import convert_tflite  # noqa: E402

THREADS = 2
RESULTS = Path(__file__).resolve().parent / "results" / "tflite.md"
MODELS = {
    "face_detection_short_range": "face_detection/face_detection_short_range.tflite",
    "hand_landmark_lite": "hand_landmark/hand_landmark_lite.tflite",
    "palm_detection_lite": "palm_detection/palm_detection_lite.tflite",
    "iris_landmark": "iris_landmark/iris_landmark.tflite",
    "pose_landmark_full": "pose_landmark/pose_landmark_full.tflite",
}
SYSTEMS = ("ours", "LiteRT XNNPACK", "LiteRT builtin")


def model_dir() -> Path | None:
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "modules"


def ours(data: bytes) -> Runner:
    buf = convert_tflite(data)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS))
    tensor, outputs = session.GetInputs()[0], list(session.GetOutputs().values())

    def run(x: np.ndarray) -> list[np.ndarray]:
        tensor.set_data(x)
        session.RunGraph()
        return [o.numpy() for o in outputs]
    return run


def litert(resolver: OpResolverType):
    def build(data: bytes) -> Runner:
        interpreter = Interpreter(model_content=data, num_threads=THREADS, experimental_op_resolver_type=resolver)
        interpreter.allocate_tensors()
        index = interpreter.get_input_details()[0]["index"]
        outputs = [d["index"] for d in interpreter.get_output_details()]

        def run(x: np.ndarray) -> list[np.ndarray]:
            interpreter.set_tensor(index, x)
            interpreter.invoke()
            return [interpreter.get_tensor(i) for i in outputs]
        return run
    return build


BUILDERS = {"ours": ours, "LiteRT XNNPACK": litert(OpResolverType.AUTO),
            "LiteRT builtin": litert(OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)}


def prepare(name: str, data: bytes) -> Case:
    detail = Interpreter(model_content=data).get_input_details()[0]
    feed = np.random.default_rng(0).uniform(-1, 1, detail["shape"]).astype(detail["dtype"])
    case = Case(name, 1, feed, {}, {}, {})
    for system, build in BUILDERS.items():
        try:
            runner = build(data)
            case.outputs[system] = [o.copy() for o in runner(feed)]
        except Exception as e:   # a missing rule or kernel must not stop the other measurements
            print(f"note: {system} cannot run {name}: {type(e).__name__}: {e}".splitlines()[0])
            continue
        case.runners[system], case.times[system] = runner, []
    return case


def _agreement(case: Case, system: str) -> float | None:
    """Max over outputs of |system - LiteRT builtin| / range of the LiteRT output."""
    if system not in case.outputs or "LiteRT builtin" not in case.outputs:
        return None
    return max(float(np.abs(a.astype(np.float64) - e).max()) / (float(e.max() - e.min()) or 1.0)
               for a, e in zip(case.outputs[system], case.outputs["LiteRT builtin"]))


def table(cases: list[Case], rounds: int) -> str:
    lines = [f"Median of {rounds} interleaved rounds, {THREADS} threads per system, batch 1, times in ms.", "",
             "| model | ours ms | LiteRT XNNPACK ms | LiteRT builtin ms | ours / XNNPACK | ours / builtin "
             "| max diff ours (of range) | max diff XNNPACK (of range) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        ms = {s: _ms(case.times.get(s)) for s in SYSTEMS}
        lines.append(f"| {case.model} | {_fmt(ms['ours'], '.2f')} | {_fmt(ms['LiteRT XNNPACK'], '.2f')} "
                     f"| {_fmt(ms['LiteRT builtin'], '.2f')} "
                     f"| {_fmt(_ratio(ms['ours'], ms['LiteRT XNNPACK']), '.2f')} "
                     f"| {_fmt(_ratio(ms['ours'], ms['LiteRT builtin']), '.2f')} "
                     f"| {_fmt(_agreement(case, 'ours'), '.1e')} | {_fmt(_agreement(case, 'LiteRT XNNPACK'), '.1e')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (median reported)")
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {','.join(MODELS)}")
    args = parser.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown or args.rounds < 1:
        parser.error(f"unknown models {unknown}" if unknown else "--rounds must be at least 1")
    root = model_dir()
    cases = []
    for name in names:
        path = root / MODELS[name] if root else None
        if path is None or not path.exists():
            print(f"note: {name} skipped: install the model files with pip install --no-deps mediapipe==0.10.14")
            continue
        cases.append(prepare(name, path.read_bytes()))
    load_before = os.getloadavg()[0]
    run_rounds(cases, args.rounds)
    write_report(RESULTS, table(cases, args.rounds), load_before)
    return 0


if __name__ == "__main__":
    sys.exit(main())
