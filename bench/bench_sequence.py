"""Sequence models: inference against onnxruntime and a training step against PyTorch, each engine in its own
process.

    python bench/bench_sequence.py [--rounds 3] [--steps 10] [--cases text_encoder:8,kws_gru:1,kws_gru:16,kws_lstm:1]

`MODELS` maps a name to a builder `batch -> (PyTorch module, ONNX export, inputs)`; the text encoder is the zoo's
BERT-style `models.text.TextEncoder` (2 layers, width 32, 4 heads, 16 tokens, 3 classes), the keyword spotters
`models.sequence.kws_gru` / `kws_lstm` (2-layer GRU/LSTM 64, 49x40 frames, 12 classes). Inference: ours is the
export converted with `converter.convert` in a `LiteSession`; onnxruntime runs the same export (ORT_ENABLE_ALL,
`session.intra_op.allow_spinning=0`). Training step (forward, softmax cross-entropy, backward, Adam update, lr
1e-3): ours is `convert_for_training` in a `TrainSession`; PyTorch runs the original module with torch.optim.Adam.
Every engine gets 2 threads (torch with OMP_WAIT_POLICY=PASSIVE) and runs in a fresh process per round, so no
engine's thread pool spins on the cores of another; rounds alternate the engine order. A process times `--steps`
calls after one untimed warm-up and reports their median; the table gives the median over rounds, and the
first-step training losses, which must agree. The report is printed and written to `bench/results/sequence.md`.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402

THREADS = 2
LR = 1e-3
RESULTS = Path(__file__).resolve().parent / "results" / "sequence.md"
ENGINES = {"infer": ("ours", "onnxruntime"), "train": ("ours", "torch")}


def _text_encoder(batch: int):
    from models.text import text_encoder
    module, model = text_encoder(batch=batch)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, 64, (batch, 16)).astype(np.int64)
    return module, model, {"tokens": tokens}, rng.integers(0, 3, batch).astype(np.int32)


def _kws(cell: str) -> Callable[[int], tuple]:
    """The zoo's keyword spotter (`models.sequence`): 2-layer GRU/LSTM 64 over 49x40 MFCC-like frames, 12 classes."""
    def build(batch: int):
        from models import sequence
        size = dict(num_classes=12, features=40, hidden=64)
        model = (sequence.kws_gru if cell == "GRU" else sequence.kws_lstm)(batch=batch, frames=49, **size)
        rng = np.random.default_rng(0)
        frames = rng.standard_normal((batch, 49, 40)).astype(np.float32)
        return sequence.kws_module(cell, **size), model, {"input": frames}, rng.integers(0, 12, batch).astype(np.int32)
    return build


MODELS: dict[str, Callable[[int], tuple]] = {"text_encoder": _text_encoder, "kws_gru": _kws("GRU"),
                                             "kws_lstm": _kws("LSTM")}


def _timed(step: Callable[[], float], steps: int) -> dict[str, float]:
    first = step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append((time.perf_counter() - start) * 1e3)
    return {"ms": statistics.median(times), "first": first}


def _worker(engine: str, task: str, name: str, batch: int, steps: int) -> dict[str, float]:
    """One engine's measurement of one case, in this (fresh) process."""
    module, model, feeds, labels = MODELS[name](batch)
    if engine == "torch":
        import torch
        import torch.nn.functional as F
        torch.set_num_threads(THREADS)
        module.train()
        optimizer = torch.optim.Adam(module.parameters(), lr=LR)
        xs, ys = [torch.from_numpy(v) for v in feeds.values()], torch.from_numpy(labels).long()

        def step() -> float:
            optimizer.zero_grad()
            loss = F.cross_entropy(module(*xs), ys)
            loss.backward()
            optimizer.step()
            return float(loss.detach())
    elif engine == "onnxruntime":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])

        def step() -> float:
            return float(sess.run(None, feeds)[0].reshape(-1)[0])
    else:
        import lite
        from converter import convert, convert_for_training
        from converter.train import TrainParams
        if task == "train":
            buf = convert_for_training(model, TrainParams(optimizer="adam", learning_rate=LR))
            session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS), True)
            session.GetInputsByTensorName("labels").set_data(labels)
            out = session.GetOutputByTensorName("loss")
        else:
            buf = convert(model)
            session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS))
            out = next(iter(session.GetOutputs().values()))
        for key, value in feeds.items():
            session.GetInputsByTensorName(key).set_data(value)

        def step() -> float:
            session.RunGraph()
            return float(out.MutableData().reshape(-1)[0])
    return _timed(step, steps)


def _run(engine: str, task: str, name: str, batch: int, steps: int) -> dict[str, float] | None:
    cmd = [sys.executable, __file__, "--worker", f"{engine}:{task}:{name}:{batch}", "--steps", str(steps)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode:
        print(f"note: {engine} {task} {name} failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(results: dict[tuple, list[dict[str, float]]], rounds: int, steps: int) -> str:
    lines = [f"Sequence models: median over {rounds} rounds of each process's median of {steps} calls, {THREADS} "
             "threads per engine, one process per engine and round; times in ms.", "",
             "| model | batch | task | ours ms | reference | reference ms | ours/reference | first loss ours "
             "| reference |", "|---|---:|---|---:|---|---:|---:|---:|---:|"]
    for (name, batch, task), _ in sorted({k[:3]: 0 for k in results}.items()):
        ours_runs, ref = results.get((name, batch, task, "ours"), []), ENGINES[task][1]
        ref_runs = results.get((name, batch, task, ref), [])
        ms = [statistics.median(r["ms"] for r in runs) if runs else None for runs in (ours_runs, ref_runs)]
        ratio = f"{ms[0] / ms[1]:.2f}" if None not in ms else "n/a"
        losses = [f"{runs[0]['first']:.6f}" if runs and task == "train" else "" for runs in (ours_runs, ref_runs)]
        lines.append(f"| {name} | {batch} | {task} | {ms[0] or float('nan'):.2f} | {ref} | "
                     f"{ms[1] or float('nan'):.2f} | {ratio} | {losses[0]} | {losses[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--cases", default="text_encoder:8,kws_gru:1,kws_gru:16,kws_lstm:1",
                        help=f"model:batch pairs, models from {list(MODELS)}")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        engine, task, name, batch = args.worker.split(":")
        print(json.dumps(_worker(engine, task, name, int(batch), args.steps)))
        return 0
    cases = [(name, int(batch)) for name, batch in (c.split(":") for c in args.cases.split(",") if c)]
    unknown = sorted({name for name, _ in cases} - set(MODELS))
    if unknown:
        parser.error(f"unknown models {unknown}")
    import harness
    from bench_inference import versions
    load_before = os.getloadavg()[0]
    results: dict[tuple, list[dict[str, float]]] = {}
    for r in range(args.rounds):
        for name, batch in cases:
            for task, engines in ENGINES.items():
                for engine in engines if r % 2 == 0 else engines[::-1]:
                    result = _run(engine, task, name, batch, args.steps)
                    if result is not None:
                        results.setdefault((name, batch, task, engine), []).append(result)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    harness.write_report(RESULTS, table(results, args.rounds, args.steps), load_before, versions(with_peer=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
