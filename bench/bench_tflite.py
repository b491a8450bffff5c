"""Latency of `.tflite` models converted with `converter_lite --fmk=TFLITE`, next to LiteRT running the originals.

    python bench/bench_tflite.py [--rounds 7] [--models face_detection_short_range,hand_landmark_lite,...]

Models: MediaPipe 0.10's solution models, read from an installed `mediapipe` wheel without importing it (`pip
install --no-deps mediapipe==0.10.14`; absent models are skipped with a note), and a fully int8 MobileNet-v1-style
network built here with the schema's builders (`mobilenet_int8`, always available). Every system gets 2 threads: our
session `Context(thread_num=2)`; LiteRT's `Interpreter(num_threads=2)` twice, with its default XNNPACK delegate and
with its builtin kernels only (the oracle of the tests). Rounds are interleaved as `bench/harness.py`'s back-to-back
mode (each timed call right after an untimed one of the same system, the systems' order rotating); the
table gives medians, and each system's outputs are compared with LiteRT's builtin kernels (max difference relative
to each output's range). Printed and written atomically to `bench/results/tflite.md`.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
from ai_edge_litert.interpreter import Interpreter, OpResolverType  # noqa: E402

import harness  # noqa: E402
import lite  # noqa: E402
from converter import convert_tflite  # noqa: E402
from harness import fmt as _fmt, median as _ms, ratio as _ratio  # noqa: E402

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
Runner = Callable[[np.ndarray], list[np.ndarray]]


@dataclass
class Case:
    """One model: a runner per system that could run it, their outputs and timings (ms)."""
    model: str
    feed: np.ndarray
    runners: dict[str, Runner] = field(default_factory=dict)
    outputs: dict[str, list[np.ndarray]] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)
INT8_NET = "mobilenet_v1_int8_128"
# (output channels, stride) of the 3x3 stem, then of each depthwise 3x3 + pointwise 1x1 block
STEM, BLOCKS = (16, 2), ((32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1))
OPTIONS = {"CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
           "FULLY_CONNECTED": "FullyConnectedOptions"}


def _mobilenet(weights: dict[str, np.ndarray], ranges: list[tuple[float, float]] | None) -> tuple[bytes, list[int]]:
    """The network of `mobilenet_int8` as a file, and the indices of its activation tensors: float when
    `ranges` is None, else int8 with the (min, max) of each activation in order (the input image's first),
    QUANTIZE / DEQUANTIZE at the float borders."""
    from tests.tflite_models import TFLiteModel
    m, acts, scales = TFLiteModel(), [], {}
    todo = iter(ranges or ())

    def act(shape: list[int]) -> int:
        if ranges is None:
            acts.append(m.tensor(shape, name=f"a{len(acts)}"))
            return acts[-1]
        lo, hi = next(todo)
        scale = (hi - lo) / 255 or 1.0
        acts.append(m.tensor(shape, np.int8, name=f"a{len(acts)}", scale=scale,
                             zero_point=int(np.clip(np.rint(-128 - lo / scale), -128, 127))))
        scales[acts[-1]] = scale
        return acts[-1]

    def layer(op: str, x: int, name: str, axis: int, shape: list[int], **fields) -> int:
        """One weighted op; int8: weights symmetric per output channel (`axis`), int32 bias at s_x * s_w."""
        w, b = weights[name], weights[name + "_b"]
        inputs = [x, m.const(w), m.const(b)]
        if ranges is not None:
            scale = np.abs(np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)).max(axis=1) / 127
            zeros = np.zeros(scale.size, np.int64)
            q = np.rint(w / scale.reshape([-1 if i == axis else 1 for i in range(w.ndim)])).astype(np.int8)
            bias_scale = scales[x] * scale
            inputs[1:] = [m.const(q, scale=scale, zero_point=zeros, axis=axis),
                          m.const(np.rint(b / bias_scale).astype(np.int32), scale=bias_scale, zero_point=zeros)]
        y = act(shape)
        m.op(op, inputs, [y], OPTIONS[op], **fields)
        return y

    source = m.tensor([1, 128, 128, 3], name="image")
    x = source
    if ranges is not None:
        x = act([1, 128, 128, 3])
        m.op("QUANTIZE", [source], [x])
    size, channels = 128 // STEM[1], STEM[0]
    conv = dict(Padding=0, FusedActivationFunction=3)
    x = layer("CONV_2D", x, "stem", 0, [1, size, size, channels], StrideW=STEM[1], StrideH=STEM[1], **conv)
    for k, (out, stride) in enumerate(BLOCKS):
        size //= stride
        x = layer("DEPTHWISE_CONV_2D", x, f"dw{k}", 3, [1, size, size, channels], StrideW=stride, StrideH=stride,
                  DepthMultiplier=1, **conv)
        x = layer("CONV_2D", x, f"pw{k}", 0, [1, size, size, out], StrideW=1, StrideH=1, **conv)
        channels = out
    pooled = act([1, channels])
    m.op("MEAN", [x, m.const(np.array([1, 2], np.int32))], [pooled], "ReducerOptions")
    logits = layer("FULLY_CONNECTED", pooled, "fc", 0, [1, 10])
    if ranges is None:
        return m.build([source], [logits]), acts
    out = m.tensor([1, 10], name="logits")
    m.op("DEQUANTIZE", [logits], [out])
    return m.build([source], [out]), acts


def mobilenet_int8() -> bytes:
    """A MobileNet-v1-style network on a 128x128 image (3x3 stem, 7 depthwise-separable blocks to 256
    channels, RELU6 fused, MEAN, FC 10) with random He-initialised weights, fully int8: per-channel int8
    weights, int32 biases, per-tensor int8 activations over the ranges LiteRT measures on the float version."""
    rng = np.random.default_rng(0)
    shapes, channels = {"stem": (STEM[0], 3, 3, 3)}, STEM[0]
    for k, (out, _) in enumerate(BLOCKS):
        shapes[f"dw{k}"], shapes[f"pw{k}"], channels = (1, 3, 3, channels), (out, 1, 1, channels), out
    shapes["fc"] = (10, channels)
    weights = {}
    for name, shape in shapes.items():
        depthwise = name.startswith("dw")
        weights[name] = (rng.standard_normal(shape) * np.sqrt(2 / (9 if depthwise else np.prod(shape[1:])))
                         ).astype(np.float32)
        weights[name + "_b"] = (rng.standard_normal(shape[-1] if depthwise else shape[0]) * 0.1).astype(np.float32)
    image = rng.uniform(-1, 1, (1, 128, 128, 3)).astype(np.float32)
    data, acts = _mobilenet(weights, None)
    interpreter = Interpreter(model_content=data, experimental_preserve_all_tensors=True,
                              experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    interpreter.set_tensor(interpreter.get_input_details()[0]["index"], image)
    interpreter.invoke()
    ranges = [(min(float(v.min()), 0.0), max(float(v.max()), 0.0))
              for v in [image, *(interpreter.get_tensor(i) for i in acts)]]
    return _mobilenet(weights, ranges)[0]


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
    case = Case(name, feed)
    for system, build in BUILDERS.items():
        try:
            runner = build(data)
            case.outputs[system] = [o.copy() for o in runner(feed)]
        except Exception as e:   # a missing rule or kernel must not stop the other measurements
            print(f"note: {system} cannot run {name}: {type(e).__name__}: {e}".splitlines()[0])
            continue
        case.runners[system] = runner
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


def litert_version() -> str:
    from importlib.metadata import version
    return version("ai-edge-litert")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (median reported)")
    names = [*MODELS, INT8_NET]
    parser.add_argument("--models", default=",".join(names), help=f"comma-separated, from {','.join(names)}")
    args = parser.parse_args(argv)
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS) - {INT8_NET})
    if unknown or args.rounds < 1:
        parser.error(f"unknown models {unknown}" if unknown else "--rounds must be at least 1")
    root = model_dir()
    cases = []
    for name in names:
        if name == INT8_NET:
            cases.append(prepare(name, mobilenet_int8()))
            continue
        path = root / MODELS[name] if root else None
        if path is None or not path.exists():
            print(f"note: {name} skipped: install the model files with pip install --no-deps mediapipe==0.10.14")
            continue
        cases.append(prepare(name, path.read_bytes()))
    load_before = os.getloadavg()[0]
    for case in cases:
        case.times = harness.interleaved({s: (lambda r=r, x=case.feed: r(x)) for s, r in case.runners.items()},
                                         args.rounds)
    harness.write_report(RESULTS, table(cases, args.rounds), load_before, {"ai-edge-litert": litert_version()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
