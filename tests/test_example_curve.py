"""The MNIST example's curve files: the CSV holds every epoch's numbers and the PNG is a real image."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib.image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from train_lenet_mnist import save_curve  # noqa: E402

ROWS = [{"epoch": 1, "learning_rate": 0.002, "train_loss": 0.5, "train_accuracy": 0.8, "test_accuracy": 0.85,
         "seconds": 1.0},
        {"epoch": 2, "learning_rate": 0.001, "train_loss": 0.25, "train_accuracy": 0.9, "test_accuracy": 0.93,
         "seconds": 1.5}]


def test_curve_is_written_as_csv_and_png(tmp_path):
    written = save_curve(ROWS, tmp_path)
    assert written == [tmp_path / "lenet_mnist.csv", tmp_path / "lenet_mnist.png"]
    with open(written[0], newline="") as f:
        rows = list(csv.DictReader(f))
    assert [{k: float(v) for k, v in r.items()} for r in rows] == [{k: float(v) for k, v in r.items()} for r in ROWS]
    image = matplotlib.image.imread(written[1])
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100
    assert image[..., :3].std() > 0.05                                  # something is drawn
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lenet_mnist.csv", "lenet_mnist.png"]  # no temporaries
