"""The MNIST example: its curve files (the CSV holds every epoch's numbers, the PNG is a real image) and its
one-line message when MNIST is missing."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import matplotlib.image
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from train_lenet_mnist import MNIST_FILES, main, save_curve  # noqa: E402

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


def test_missing_mnist_is_one_line_naming_the_files_and_the_flag(tmp_path):
    with pytest.raises(SystemExit) as stopped:
        main(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path)])
    message = str(stopped.value.code)
    assert "\n" not in message and str(tmp_path / "nowhere" / "train-images-idx3-ubyte") in message
    assert all(name in message for name in MNIST_FILES) and "--data" in message
