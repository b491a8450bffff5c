"""A classifier exported by PyTorch itself (not from our zoo) converts with --trainModel=true and trains: its first
step equals the original PyTorch module's, and the loss falls."""
from __future__ import annotations

import io

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import lite
from converter import convert_for_training
from converter.train import TrainParams
from tests.util import train_step


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8 * 4 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
        return self.head(torch.flatten(x, 1))


def exported(module: nn.Module) -> onnx.ModelProto:
    buffer = io.BytesIO()
    module.eval()
    torch.onnx.export(module, torch.zeros(4, 3, 8, 8), buffer, input_names=["input"], output_names=["logits"],
                      opset_version=13, dynamo=False, do_constant_folding=False,
                      training=torch.onnx.TrainingMode.EVAL)
    return onnx.load_from_string(buffer.getvalue())


@pytest.fixture(scope="module")
def net() -> tuple[nn.Module, bytes]:
    torch.manual_seed(0)
    module = SmallNet()
    return module, convert_for_training(exported(module), TrainParams(optimizer="sgd", learning_rate=0.1))


def _data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((4, 3, 8, 8)).astype(np.float32), rng.integers(0, 5, 4).astype(np.int32)


def test_first_step_equals_the_original_module(net) -> None:
    module, buf = net
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    x, labels = _data()
    loss = train_step(session, x, labels)
    reference = SmallNet()
    reference.load_state_dict(module.state_dict())
    reference.double().train()
    expected = F.cross_entropy(reference(torch.from_numpy(x).double()), torch.from_numpy(labels).long())
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    grads = {t.tensor_name(): t.numpy() for t in session.GetGradients()}
    wanted = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    largest = max(np.abs(g).max() for g in wanted.values())
    for name, want in wanted.items():    # conv.bias feeds a train-mode BatchNorm: its gradient is exactly 0
        assert np.abs(grads[name] - want).max() <= 1e-4 * max(np.abs(want).max(), 1e-2 * largest), name


def test_loss_falls(net) -> None:
    _, buf = net
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    x, labels = _data(1)
    losses = [train_step(session, x, labels) for _ in range(20)]
    assert losses[-1] < 0.5 * losses[0], losses
