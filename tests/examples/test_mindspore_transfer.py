"""The MindSpore transfer-learning example (examples/mindspore_transfer.py), short: the network MindSpore trained
on the digits 0-4 (committed as MINDIR) learns the digits 5-9 on device, and its curve is drawn."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="the example's data are scikit-learn's digits")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
from mindspore_transfer import MODEL, fine_tune, save_curve  # noqa: E402


def test_fine_tuning_the_mindspore_network_learns_the_new_digits(tmp_path):
    import matplotlib.image
    assert MODEL.is_file()
    _, losses, accuracy = fine_tune(epochs=3, learning_rate=0.01)
    assert accuracy[0] < 0.4 and accuracy[-1] > 0.85, accuracy      # from chance to most digits right
    assert np.mean(losses[-10:]) < 0.25 * np.mean(losses[:10]), losses
    image = matplotlib.image.imread(save_curve(losses, accuracy, tmp_path))
    assert image.ndim == 3 and image[..., :3].std() > 0.05            # something is drawn
