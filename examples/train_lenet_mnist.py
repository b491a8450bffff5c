"""Train LeNet-5 from scratch on MNIST on device: converter (`--trainModel=true`) + `lite.TrainSession`.

    python examples/train_lenet_mnist.py [--data ../shared/datasets/mnist] [--epochs 5] [--batch 32]
                                         [--lr 0.002] [--out examples/results]

LeNet-5 from the model zoo (28x28 input, 10 classes, seeded initial weights) is converted with an Adam optimizer
and trained with `lite.TrainLoop`; after every epoch the test set is evaluated in eval mode and one line is
printed. From the third epoch on, each epoch runs at half the previous learning rate (`LRScheduler`). The curve
(loss, train and test accuracy per epoch) is written to `<out>/lenet_mnist.csv` and, when matplotlib is
installed, `<out>/lenet_mnist.png`; the trained model is exported for inference to `<out>/lenet_mnist.ms` and
checked once in a plain `LiteSession`. Exits 1 when the final test accuracy is below 99 %.

`--data` is a folder holding the MNIST database's four IDX files under their usual names (MNIST_FILES, gzip-compressed
or not); by default the workspace's `../shared/datasets/mnist` beside the checkout. Without them the example says
in one line which file it missed and what to put where.
"""
from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

import lite  # noqa: E402
import models  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from lite.atomic_file import write_atomic  # noqa: E402
from lite.train import load_mnist  # noqa: E402
from lite.train.dataset import DatasetError  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "datasets" / "mnist"
MNIST_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
MEAN, STD = 0.1307, 0.3081          # of the MNIST training pixels in [0, 1]


def prepare(images: np.ndarray) -> np.ndarray:
    """uint8 [N, 28, 28] -> normalised float32 [N, 1, 28, 28]."""
    return ((images.astype(np.float32) / 255 - MEAN) / STD)[:, None]


def load_split(data: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """`load_mnist`, or exit with one line saying which file is missing and what to put where."""
    try:
        return load_mnist(data, split)
    except DatasetError as e:
        raise SystemExit(f"{e.args[0]}. Put the MNIST database's four IDX files ({', '.join(MNIST_FILES)}; .gz or not) in "
                         f"one folder and pass --data FOLDER (default: ../shared/datasets/mnist beside the checkout)")


def halve_after_second_epoch(lr: float, epoch: int) -> float:
    """The LRScheduler lambda (`epoch` 0-based, called at its end): halve from the end of the second epoch on."""
    return lr * 0.5 if epoch >= 1 else lr


def save_curve(rows: list[dict[str, float]], out: Path, stem: str = "lenet_mnist",
               title: str = "LeNet-5 on MNIST") -> list[Path]:
    """`<stem>.csv` always, `<stem>.png` when matplotlib is importable; both written atomically."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    written = [out / f"{stem}.csv"]
    write_atomic(written[0], text.getvalue().encode())
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return written
    epochs = [r["epoch"] for r in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.plot(epochs, [r["train_loss"] for r in rows], marker="o")
    left.set(xlabel="epoch", ylabel="training loss", title=title)
    right.plot(epochs, [100 * r["train_accuracy"] for r in rows], marker="o", label="train")
    right.plot(epochs, [100 * r["test_accuracy"] for r in rows], marker="o", label="test")
    right.set(xlabel="epoch", ylabel="accuracy (%)")
    right.legend()
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    written.append(out / f"{stem}.png")
    write_atomic(written[1], png.getvalue())
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder with the four MNIST IDX files")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    train_x, train_y = load_split(args.data, "train")
    test_x, test_y = load_split(args.data, "test")
    train = lite.Dataset(prepare(train_x), train_y.astype(np.int32), batch_size=args.batch, shuffle=True, seed=0)
    test = lite.Dataset(prepare(test_x), test_y.astype(np.int32), batch_size=500)

    onnx_model = models.build("lenet5", num_classes=10, input_size=28, batch=args.batch)
    buf = convert_for_training(onnx_model, TrainParams(optimizer="adam", learning_rate=args.lr))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=args.threads), True)
    loop = lite.TrainLoop(session, verbose=False)
    scheduler = lite.LRScheduler(halve_after_second_epoch)
    print(f"LeNet-5: {len(train_y)} training images, {len(test_y)} test images, batch {args.batch}, Adam lr "
          f"{args.lr}, {args.threads} threads")

    rows = []
    for _ in range(args.epochs):
        lr = session.GetLearningRate()
        started = time.perf_counter()
        loop.Train(1, train, [scheduler])
        (test_accuracy,) = loop.Eval(test)
        record = loop.history[-1]
        rows.append({"epoch": record.epoch, "learning_rate": float(f"{lr:.6g}"), "train_loss": round(record.loss, 6),
                     "train_accuracy": round(record.accuracy, 6), "test_accuracy": round(test_accuracy, 6),
                     "seconds": round(time.perf_counter() - started, 1)})
        print(f"epoch {record.epoch}: lr {lr:.2e}, loss {record.loss:.4f}, train accuracy "
              f"{record.accuracy:.2%}, test accuracy {test_accuracy:.2%}, {rows[-1]['seconds']:.1f} s", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    written = save_curve(rows, args.out)
    exported = args.out / "lenet_mnist.ms"
    session.Export(exported, lite.MT_INFERENCE)
    plain = lite.LiteSession.CreateSession(lite.Context(thread_num=args.threads))
    plain.CompileGraph(lite.Model.Load(exported))
    plain.Resize(plain.GetInputs(), [[len(test_y), 1, 28, 28]])
    plain.GetInputs()[0].set_data(prepare(test_x))
    plain.RunGraph()
    exported_accuracy = float(np.mean(plain.GetOutputs()["logits"].MutableData().argmax(axis=1) == test_y))
    print(f"final test accuracy {rows[-1]['test_accuracy']:.2%} (exported inference model: "
          f"{exported_accuracy:.2%}); wrote {', '.join(str(p) for p in [*written, exported])}")
    return 0 if rows[-1]["test_accuracy"] >= 0.99 else 1


if __name__ == "__main__":
    sys.exit(main())
