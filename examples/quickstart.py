"""Build MobileNetV2 from the model zoo, convert it with `converter_lite`, and run it with the session API.

    python examples/quickstart.py [--model mobilenet_v2] [--input-size 224] [--loops 10]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import lite
import models
from converter.cli import main as converter_lite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="mobilenet_v2", choices=sorted(models.ZOO))
    parser.add_argument("--input-size", type=int, default=224)
    parser.add_argument("--loops", type=int, default=10)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, ms_path = Path(tmp) / f"{args.model}.onnx", Path(tmp) / args.model
        kwargs = {"input_size": args.input_size} if args.model != "lenet5" else {}
        models.save(models.build(args.model, **kwargs), onnx_path)
        started = time.perf_counter()
        status = converter_lite(["--fmk=ONNX", f"--modelFile={onnx_path}", f"--outputFile={ms_path}"])
        if status != 0:
            raise SystemExit(status)
        print(f"converted in {time.perf_counter() - started:.2f} s: "
              f"{onnx_path.stat().st_size / 1e6:.1f} MB ONNX -> {Path(f'{ms_path}.ms').stat().st_size / 1e6:.1f} MB .ms")

        model = lite.Model.Load(f"{ms_path}.ms")
        session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
        session.CompileGraph(model)
        tensor = session.GetInputs()[0]
        tensor.set_data(np.random.default_rng(0).standard_normal(tensor.shape()).astype(np.float32))
        session.RunGraph()                                    # warm-up
        times = []
        for _ in range(args.loops):
            started = time.perf_counter()
            session.RunGraph()
            times.append((time.perf_counter() - started) * 1e3)
        logits = session.GetOutputByTensorName("logits").numpy()[0]
        top5 = np.argsort(logits)[::-1][:5]
        print(f"input {tensor.tensor_name()} {tensor.shape()}, output logits {list(logits.shape)}, "
              f"arena {session.arena_bytes / 1e6:.1f} MB")
        print("top-5 classes:", ", ".join(f"{c} ({logits[c]:.3f})" for c in top5))
        print(f"RunGraph: min {min(times):.2f} ms, avg {np.mean(times):.2f} ms over {args.loops} runs")


if __name__ == "__main__":
    main()
