"""Training-step time of this runtime against PyTorch eager, side by side on the same ONNX models.

    python bench/bench_training.py [--rounds 7] [--cases lenet5:32,lenet5:128,mobilenet_v2:32]

A step is forward, softmax cross-entropy, backward and an SGD-with-momentum update (lr 0.01, momentum 0.9) on
one fixed batch. Ours: the model converted with `converter.convert_for_training` and run by `lite.TrainSession`
(`Context(thread_num=2)`). PyTorch: `tests.oracles.torch_reference.to_torch` in train mode with `torch.optim.SGD`,
`torch.set_num_threads(2)` and OMP_WAIT_POLICY=PASSIVE (set before torch loads, unless already set). Both start
from the same weights, so their first-step losses must agree (printed as a check). Models: LeNet-5 (1x32x32,
10 classes) at batch 32 and 128, MobileNetV2 at 3x32x32 (10 classes) at batch 32. Rounds are interleaved (each
timed step follows an untimed one, `bench/harness.py`) and the table gives the median over rounds. The table is
printed and written atomically to `bench/results/training.md` (or `--out`).
On a 2-core machine the numbers swing with any other load (OpenBLAS's worker threads suffer most from a busy
core): the report ends with the load average before and after the rounds.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # read once, when torch loads libgomp
REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import harness  # noqa: E402
import lite  # noqa: E402
import models  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from tests.oracles.torch_reference import to_torch  # noqa: E402

THREADS = 2
CLASSES = 10
LR, MOMENTUM = 0.01, 0.9
RESULTS = Path(__file__).resolve().parent / "results" / "training.md"
ZOO: dict[str, Callable[[int], onnx.ModelProto]] = {
    "lenet5": lambda batch: models.build("lenet5", num_classes=CLASSES, input_size=32, batch=batch),
    "mobilenet_v2": lambda batch: models.build("mobilenet_v2", num_classes=CLASSES, input_size=32, batch=batch),
}
Step = Callable[[], float]     # one training step on the case's batch; returns the loss


def ours(model: onnx.ModelProto, x: np.ndarray, labels: np.ndarray) -> Step:
    buf = convert_for_training(model, TrainParams(optimizer="momentum", momentum=MOMENTUM, learning_rate=LR))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=THREADS), True)
    session.GetInputsByTensorName(model.graph.input[0].name).set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    loss = session.GetOutputByTensorName("loss")

    def step() -> float:
        session.RunGraph()
        return float(loss.MutableData())
    return step


def pytorch(model: onnx.ModelProto, x: np.ndarray, labels: np.ndarray) -> Step:
    return torch_step(to_torch(model).train(), x, labels)


def torch_step(module: torch.nn.Module, x: np.ndarray, labels: np.ndarray) -> Step:
    """One step of `module` (in train mode) with cross-entropy and SGD with momentum."""
    optimizer = torch.optim.SGD(module.parameters(), lr=LR, momentum=MOMENTUM)
    xt, yt = torch.from_numpy(x), torch.from_numpy(labels).long()

    def step() -> float:
        optimizer.zero_grad()
        loss = F.cross_entropy(module(xt), yt)
        loss.backward()
        optimizer.step()
        return float(loss.detach())
    return step


SYSTEMS = {"ours": ours, "torch": pytorch}


@dataclass
class Case:
    model: str
    batch: int
    dropout: bool                # the model has Dropout: each system draws its own masks
    steps: dict[str, Step] = field(default_factory=dict)
    first_loss: dict[str, float] = field(default_factory=dict)
    times: dict[str, list[float]] = field(default_factory=dict)


def prepare(name: str, batch: int) -> Case:
    """Every system's step function, run once untimed (its loss kept); a system that fails is left out."""
    model = ZOO[name](batch)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    rng = np.random.default_rng(batch)
    x = rng.standard_normal([batch, *(d.dim_value for d in dims[1:])]).astype(np.float32)
    labels = rng.integers(0, CLASSES, batch).astype(np.int32)
    case = Case(name, batch, any(n.op_type == "Dropout" for n in model.graph.node))
    for system, build in SYSTEMS.items():
        try:
            step = build(model, x, labels)
            case.first_loss[system] = step()
        except Exception as e:   # a missing kernel must not stop the other measurements
            print(f"note: {system} cannot train {name} batch {batch}: {type(e).__name__}: {e}".splitlines()[0])
            continue
        case.steps[system], case.times[system] = step, []
    return case


def run_rounds(cases: list[Case], rounds: int) -> None:
    """Interleaved: every round times one step of each system on each case, right after an untimed one."""
    for case in cases:
        case.times = harness.interleaved(case.steps, rounds)
        print(f"{case.model} batch {case.batch} done", flush=True)


def table(cases: list[Case], rounds: int) -> str:
    lines = [f"Training step (forward, loss, backward, SGD momentum update): median of {rounds} interleaved "
             f"rounds, {THREADS} threads per system, times in ms.", "",
             "| model | input | batch | ours ms | torch ms | ours/torch | first-step loss ours | torch |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for case in cases:
        ms = {s: harness.median(case.times.get(s)) for s in SYSTEMS}
        ratio = harness.ratio(ms["ours"], ms["torch"])
        shape = "1x32x32" if case.model == "lenet5" else "3x32x32"
        model = f"{case.model} (Dropout)" if case.dropout else case.model
        lines.append(f"| {model} | {shape} | {case.batch} | {harness.fmt(ms['ours'], '.2f')} "
                     f"| {harness.fmt(ms['torch'], '.2f')} | {harness.fmt(ratio, '.2f')} "
                     f"| {harness.fmt(case.first_loss.get('ours'), '.6f')} | {harness.fmt(case.first_loss.get('torch'), '.6f')} |")
    if any(case.dropout for case in cases):
        lines += ["", "First-step losses agree except where the model has Dropout: each system draws its own masks."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved timing rounds (median reported)")
    parser.add_argument("--cases", default="lenet5:32,lenet5:128,mobilenet_v2:32",
                        help=f"comma-separated model:batch, models from {','.join(ZOO)}")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the report")
    args = parser.parse_args(argv)
    try:
        wanted = [(name, int(batch)) for name, batch in (c.split(":") for c in args.cases.split(",") if c)]
    except ValueError:
        parser.error("--cases must be model:batch pairs")
    unknown = sorted({name for name, _ in wanted} - set(ZOO))
    if unknown or args.rounds < 1:
        parser.error(f"unknown models {unknown}" if unknown else "--rounds must be at least 1")
    torch.set_num_threads(THREADS)
    cases = [prepare(name, batch) for name, batch in wanted]
    load_before = os.getloadavg()[0]
    run_rounds(cases, args.rounds)
    harness.write_report(args.out, table(cases, args.rounds), load_before, {"torch": torch.__version__})
    return 0


if __name__ == "__main__":
    sys.exit(main())
