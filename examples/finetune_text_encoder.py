"""Fine-tune a small BERT-style encoder on device on a real labelled sequence set: converter (`--trainModel=true`)
+ `lite.TrainSession`.

    python examples/finetune_text_encoder.py [--epochs 6] [--batch 24] [--lr 0.005] [--limit N]
                                             [--out examples/results]

The data is scikit-learn's bundled handwritten digits (1,797 8x8 images, 10 classes, shipped inside the package,
so nothing is downloaded), each read as a sequence of 16 tokens: the row-major intensities 0-16 of its 2x2-pooled
4x4 image are the vocabulary. The model is the zoo's `TextEncoder` (token embeddings + learned positions, 2 encoder layers of 4
heads, mean pooling, a linear classifier), exported by PyTorch at opset 14 and converted for training with Adam:
the converter fuses each exported attention, LayerNorm and GELU back into one kernel, and trains through them.
Accuracy on the held-out fifth is printed before training and after every epoch; the curve goes to
`<out>/text_encoder_digits.csv` (and `.png` with matplotlib). Exits 1 when the final test accuracy is below 40 %
(the full run; `--limit` runs a short version on the first N sequences of each split).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "examples"))

import numpy as np  # noqa: E402

import lite  # noqa: E402
from converter import convert_for_training  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from models.text import text_encoder  # noqa: E402
from train_lenet_mnist import save_curve  # noqa: E402

VOCAB, LENGTH, CLASSES = 17, 16, 10


def load_sequences(seed: int = 0) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """(train, test) pairs of tokens int64 [N, 16] and labels int32 [N]: a seeded 80/20 split of the digits."""
    from sklearn.datasets import load_digits
    digits = load_digits()
    pooled = digits.data.reshape(-1, 4, 2, 4, 2).mean(axis=(2, 4))           # 8x8 -> 4x4, intensities 0-16
    tokens, labels = np.rint(pooled).astype(np.int64).reshape(-1, LENGTH), digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = len(labels) - 360                  # 360 test sequences: 15 batches of 24
    train, test = order[:cut], order[cut:]
    return (tokens[train], labels[train]), (tokens[test], labels[test])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--batch", type=int, default=24, help="also the evaluation batch (the export fixes it)")
    parser.add_argument("--lr", type=float, default=5e-3, help="Adam learning rate")
    parser.add_argument("--limit", type=int, default=0, help="use only the first N sequences of each split")
    parser.add_argument("--out", type=Path, default=REPO / "examples" / "results")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)

    (train_x, train_y), (test_x, test_y) = load_sequences()
    if args.limit:
        train_x, train_y, test_x, test_y = train_x[:args.limit], train_y[:args.limit], test_x[:args.limit], \
            test_y[:args.limit]
    train = lite.Dataset(train_x, train_y, batch_size=args.batch, shuffle=True, seed=0, drop_last=True)
    test = lite.Dataset(test_x, test_y, batch_size=args.batch, drop_last=True)

    _, onnx_model = text_encoder(vocab=VOCAB, length=LENGTH, classes=CLASSES, batch=args.batch)
    buf = convert_for_training(onnx_model, TrainParams(optimizer="adam", learning_rate=args.lr))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=args.threads), True)
    loop = lite.TrainLoop(session, verbose=False)
    print(f"text encoder on digit sequences: {len(train_y)} training and {len(test_y)} test sequences of "
          f"{LENGTH} tokens, batch {args.batch}, Adam lr {args.lr}, {args.threads} threads")
    (before,) = loop.Eval(test)
    print(f"before fine-tuning: test accuracy {before:.2%}", flush=True)

    rows = []
    for _ in range(args.epochs):
        started = time.perf_counter()
        loop.Train(1, train)
        (test_accuracy,) = loop.Eval(test)
        record = loop.history[-1]
        rows.append({"epoch": record.epoch, "learning_rate": args.lr, "train_loss": round(record.loss, 6),
                     "train_accuracy": round(record.accuracy, 6), "test_accuracy": round(test_accuracy, 6),
                     "seconds": round(time.perf_counter() - started, 1)})
        print(f"epoch {record.epoch}: loss {record.loss:.4f}, train accuracy {record.accuracy:.2%}, test accuracy "
              f"{test_accuracy:.2%}, {rows[-1]['seconds']:.1f} s", flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    written = save_curve(rows, args.out, "text_encoder_digits", "Text encoder on digit sequences")
    print(f"test accuracy {before:.2%} before, {rows[-1]['test_accuracy']:.2%} after fine-tuning; wrote "
          f"{', '.join(map(str, written))}")
    return 0 if args.limit or rows[-1]["test_accuracy"] >= 0.4 else 1


if __name__ == "__main__":
    sys.exit(main())
