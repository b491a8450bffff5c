"""The CTC loss and its gradient against `torch.nn.functional.ctc_loss` (float64 autograd), and its train flags."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from converter.train import TrainParams, parse_train_flags
from lite.kernels.ctc_loss import ctc
from lite.status import ParamInvalidError
from tests.oracles.torch_autograd import rel


def torch_ctc(logits: np.ndarray, labels: np.ndarray, blank: int) -> tuple[float, np.ndarray]:
    x = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    lengths = torch.tensor((labels != blank).sum(1))
    targets = torch.tensor(np.stack([np.concatenate([r[r != blank], r[r == blank]]) for r in labels])).long()
    loss = F.ctc_loss(F.log_softmax(x, 2), targets, torch.full((labels.shape[0],), logits.shape[0]), lengths,
                      blank=blank, reduction="mean")
    loss.backward()
    return loss.item(), x.grad.numpy()


@pytest.mark.parametrize("blank", [0, 4])
def test_loss_and_gradient_match_torch(blank):
    rng = np.random.default_rng(0)
    t, n, c, s = 12, 5, 6, 4
    logits = rng.standard_normal((t, n, c)).astype(np.float32) * 2
    classes = [k for k in range(c) if k != blank]
    labels = np.full((n, s), blank, np.int32)
    for row, length in zip(labels, [4, 1, 3, 0, 2]):       # an empty target and a repeated label included
        row[:length] = rng.choice(classes, length)
    labels[0, :2] = classes[1]
    loss, grad = ctc(logits, labels, blank)
    want_loss, want_grad = torch_ctc(logits, labels, blank)
    assert loss == pytest.approx(want_loss, rel=1e-6)
    assert rel(grad, want_grad) < 1e-6


def test_impossible_alignment_is_an_infinite_loss():
    """Three frames cannot emit "aa" (a blank must separate the repeats), as in PyTorch."""
    logits = np.zeros((3, 1, 3), np.float32)
    labels = np.array([[1, 1, 1]], np.int32)
    assert ctc(logits, labels, 0)[0] == torch_ctc(logits, labels, 0)[0] == np.inf


def test_ctc_flags():
    params = parse_train_flags({"loss": "ctc", "labelLength": "6", "blank": "2"})
    assert (params.loss, params.label_length, params.blank) == ("ctc", 6, 2)
    with pytest.raises(ParamInvalidError, match="label_length"):
        TrainParams(loss="ctc")
    with pytest.raises(ParamInvalidError, match="applies to loss ctc"):
        parse_train_flags({"loss": "mse", "labelLength": "6"})
