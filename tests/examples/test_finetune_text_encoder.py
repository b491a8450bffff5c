"""A tiny run of examples/finetune_text_encoder.py: it reads scikit-learn's bundled digits as token sequences,
fine-tunes on device, prints accuracy before and per epoch, and writes its curve."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn", reason="the example's data set ships with scikit-learn (dev extra)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from finetune_text_encoder import load_sequences, main  # noqa: E402


def test_digits_are_read_as_token_sequences() -> None:
    (train_x, train_y), (test_x, test_y) = load_sequences()
    assert train_x.shape == (1437, 16) and test_x.shape == (360, 16)
    assert train_x.min() >= 0 and train_x.max() <= 16 and set(train_y) == set(range(10))


def test_a_short_run_prints_progress_and_writes_the_curve(tmp_path, capsys) -> None:
    assert main(["--epochs", "2", "--limit", "48", "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    assert "before fine-tuning: test accuracy" in printed and "epoch 2:" in printed
    with open(tmp_path / "text_encoder_digits.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [1, 2]
    assert float(rows[1]["train_loss"]) < float(rows[0]["train_loss"]) * 1.5
