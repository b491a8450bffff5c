"""Federated LeNet-5 on MNIST split non-IID over 10 clients, through real Flower SuperLink/SuperNode processes.

    python examples/federated_mnist.py [--clients 10] [--rounds 10] [--per-client 1500] [--local-epochs 2]
                                       [--dp-clip 0] [--secagg] [--simulation] [--baseline run|skip]
                                       [--out examples/results]

The zoo's LeNet-5 is converted once into a training `.ms` (Adam); client k gets `--per-client` training images,
`--dominant-share` of them of digits k and k+1 (mod 10) and the rest of the other digits, in its own shard file.
`lite.federated.launch` starts a SuperLink and one SuperNode per client on 127.0.0.1, runs `--rounds` rounds of
FedAvg (each client: `--local-epochs` over its shard per round) and the server evaluates the global model on the
10 000 MNIST test images after every round (one progress line each). With `--simulation` the same apps run in
Flower's simulation engine instead (ray, `lite.federated.simulation`): for many more clients, e.g.
`--simulation --clients 50 --per-client 300`. The centralised baseline trains the same
model with the same budget — the union of the shards, `--local-epochs` epochs per round — in a parallel process.
Writes `<out>/federated_mnist.csv` and, with matplotlib, `<out>/federated_mnist.png` (accuracy per round, both
curves); exits 1 when the final global test accuracy is below 97 %.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

import numpy as np  # noqa: E402

import models  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.federated.launch import run_federation  # noqa: E402
from lite.federated.local import evaluate_locally, open_session, train_locally  # noqa: E402
from lite.federated.shards import load_shard, non_iid_split, save_shard  # noqa: E402
from lite.federated.simulation import simulate  # noqa: E402
from lite.atomic_file import write_atomic  # noqa: E402
from lite.train import load_mnist  # noqa: E402
from train_lenet_mnist import DEFAULT_DATA, prepare  # noqa: E402  (the same data and normalisation)

TARGET = 0.97


def make_inputs(args: argparse.Namespace, work: Path) -> tuple[Path, list[Path], Path]:
    """The training .ms, one shard file per client and the test set file, in `work`."""
    work.mkdir(parents=True, exist_ok=True)
    model = work / "lenet_train.ms"
    onnx_model = models.build("lenet5", num_classes=10, input_size=28, batch=args.batch)
    write_atomic(model, convert_for_training(onnx_model, TrainParams(optimizer="adam", learning_rate=args.lr)))
    train_x, train_y = load_mnist(args.data, "train")
    test_x, test_y = load_mnist(args.data, "test")
    rows = non_iid_split(train_y, args.clients, args.per_client, args.dominant_share, seed=0)
    shards = [save_shard(work / f"shard-{k}.npz", prepare(train_x[r]), train_y[r]) for k, r in enumerate(rows)]
    return model, shards, save_shard(work / "test.npz", prepare(test_x), test_y)


def centralised(args: argparse.Namespace, work: Path) -> list[float]:
    """The baseline: the union of the shards on one device, `local_epochs` epochs per round-equivalent."""
    x, y = (np.concatenate(parts) for parts in zip(*(load_shard(p) for p in sorted(work.glob("shard-*.npz")))))
    test = load_shard(work / "test.npz")
    session = open_session(work / "lenet_train.ms", threads=1)
    accuracies = []
    for r in range(1, args.rounds + 1):
        train_locally(session, x, y, epochs=args.local_epochs, batch_size=args.batch, learning_rate=args.lr, seed=r)
        accuracies.append(evaluate_locally(session, *test).accuracy)
        print(f"centralised round-equivalent {r}: test accuracy {accuracies[-1]:.2%}", flush=True)
    return accuracies


def save_curve(rows: list[dict[str, float]], out: Path) -> list[Path]:
    """The CSV always, the PNG when matplotlib is importable; both written atomically."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    written = [out / "federated_mnist.csv"]
    write_atomic(written[0], text.getvalue().encode())
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    fig, ax = plt.subplots(figsize=(6, 3.8))
    rounds = [r["round"] for r in rows]
    ax.plot(rounds, [100 * r["federated_accuracy"] for r in rows], marker="o", label="FedAvg, 10 non-IID clients")
    if all(r.get("centralised_accuracy", "") != "" for r in rows):
        ax.plot(rounds, [100 * r["centralised_accuracy"] for r in rows], marker="s",
                label="centralised, same data and epochs")
    ax.axhline(100 * TARGET, color="grey", linestyle=":", linewidth=1)
    ax.set(xlabel="round", ylabel="test accuracy (%)", title="LeNet-5 on MNIST: global model per round")
    ax.legend(loc="lower right")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    written.append(out / "federated_mnist.png")
    write_atomic(written[1], png.getvalue())
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the four MNIST IDX files")
    parser.add_argument("--clients", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--per-client", type=int, default=1500, help="training images per client")
    parser.add_argument("--dominant-share", type=float, default=0.8, help="share of a client's two own digits")
    parser.add_argument("--local-epochs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="the clients' Adam learning rate")
    parser.add_argument("--strategy", default="fedavg", choices=["fedavg", "fedadam"])
    parser.add_argument("--dp-clip", type=float, default=0.0, help="> 0: client-side DP with this clipping norm")
    parser.add_argument("--dp-epsilon", type=float, default=1.0)
    parser.add_argument("--secagg", action="store_true", help="SecAgg+ secure aggregation")
    parser.add_argument("--simulation", action="store_true",
                        help="Flower's simulation engine (ray) instead of SuperLink/SuperNode processes")
    parser.add_argument("--baseline", choices=["run", "skip"], default="run")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds for the whole federation")
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "mslite_federated_mnist",
                        help="folder for the model, shards, global models and process logs")
    parser.add_argument("--centralised-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.data.is_dir():
        parser.error(f"MNIST not found at {args.data}: pass --data")
    work = args.work.resolve()
    if args.centralised_only:
        (work / "centralised.json").write_text(json.dumps(centralised(args, work)))
        return 0

    model, shards, test = make_inputs(args, work)
    print(f"LeNet-5, {args.clients} clients x {args.per_client} images (digits k, k+1: "
          f"{args.dominant_share:.0%}), {args.rounds} rounds of {args.strategy}, {args.local_epochs} local "
          f"epoch(s), batch {args.batch}, Adam lr {args.lr}" + (f", local DP clip {args.dp_clip} epsilon "
                                                                f"{args.dp_epsilon}" if args.dp_clip else ""),
          flush=True)
    baseline = None
    if args.baseline == "run":
        (work / "centralised.json").unlink(missing_ok=True)
        baseline = subprocess.Popen([sys.executable, __file__, "--centralised-only", *(argv or sys.argv[1:])],
                                    stdout=subprocess.DEVNULL)
    run_config = {"model": str(model), "out-dir": str(work / "server"), "test-data": str(test),
                  "num-rounds": args.rounds, "min-nodes": args.clients, "strategy": args.strategy,
                  "local-epochs": args.local_epochs, "batch-size": args.batch, "lr": args.lr,
                  "round-timeout": 900.0, "dp-clip": args.dp_clip, "dp-epsilon": args.dp_epsilon,
                  "secagg": args.secagg, "secagg-max-weight": float(args.per_client)}
    nodes = [{"model": str(model), "shard": str(s)} for s in shards]
    started = time.perf_counter()
    try:
        if args.simulation:
            history = simulate(nodes, run_config)
        else:
            history = run_federation(nodes, run_config, work / "processes", args.timeout)
    finally:
        if baseline is not None and baseline.poll() is None and sys.exc_info()[0] is not None:
            baseline.kill()
    seconds = time.perf_counter() - started
    central = None
    if baseline is not None:
        baseline.wait()
        central = json.loads((work / "centralised.json").read_text())
    rows = [{"round": r["round"], "federated_accuracy": round(r["test_accuracy"], 6),
             "centralised_accuracy": round(central[r["round"] - 1], 6) if central else "",
             "seconds": r["seconds"]} for r in history["rounds"] if r["round"] > 0]
    args.out.mkdir(parents=True, exist_ok=True)
    written = save_curve(rows, args.out)
    final = rows[-1]["federated_accuracy"]
    print(f"final global test accuracy {final:.2%} after {args.rounds} rounds, {seconds:.0f} s"
          + (f" (centralised: {central[-1]:.2%})" if central else "")
          + f"; global model {work / 'server' / 'global.ms'}; wrote {', '.join(str(p) for p in written)}")
    return 0 if final >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
