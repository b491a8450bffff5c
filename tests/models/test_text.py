"""The text models of the zoo (models/text.py): the PyTorch-exported BERT-style encoder and the one written with
the opset-23 Attention op convert with converter_lite, fuse, and match onnxruntime and the PyTorch module; as
training models (--trainModel=true) their first step's loss and every weight gradient equal PyTorch autograd's
on the original module, and the loss falls when they overfit a batch."""
from __future__ import annotations

import collections
import copy

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lite
from converter import convert_for_training

from converter.load import to_graph
from converter.train import TrainParams
from models.text import attention_encoder, encoder_weights, text_encoder
from tests.util import relative_to_range, run_lite, run_ort, session_for

TOKENS = np.random.default_rng(0).integers(0, 64, (4, 16)).astype(np.int64)
LABELS = np.random.default_rng(1).integers(0, 3, 4).astype(np.int32)


@pytest.fixture(scope="module", params=[text_encoder, attention_encoder], ids=["exported", "attention_op"])
def zoo_model(request):
    return request.param.__name__, *request.param()


def test_converts_into_fused_attention_and_layer_norms(zoo_model) -> None:
    _, module, model = zoo_model
    counts = collections.Counter(n.op for n in to_graph(model).nodes)
    layers = len(module.encoder.layers)
    assert counts["Attention"] == layers and counts["LayerNorm"] == 2 * layers
    assert not {"Softmax", "MatMul", "Erf"} & set(counts)


def test_matches_onnxruntime_and_pytorch(zoo_model) -> None:
    _, module, model = zoo_model
    ours = run_lite(session_for(model), {"tokens": TOKENS})["logits"]
    expected = run_ort(model, {"tokens": TOKENS})["logits"]
    assert relative_to_range(ours, expected) <= 1e-4
    with torch.no_grad():
        assert relative_to_range(ours, module.eval()(torch.from_numpy(TOKENS)).numpy()) <= 1e-4


def _session(model, optimizer: str = "sgd", lr: float = 0.1) -> lite.TrainSession:
    buf = convert_for_training(model, TrainParams(optimizer=optimizer, learning_rate=lr))
    return lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)


def _step(session: lite.TrainSession) -> float:
    session.GetInputsByTensorName("tokens").set_data(TOKENS)
    session.GetInputsByTensorName("labels").set_data(LABELS)
    session.RunGraph()
    return float(session.GetOutputByTensorName("loss").numpy())


def test_first_training_step_equals_pytorch_autograd(zoo_model) -> None:
    name, module, model = zoo_model
    session = _session(model)
    loss = _step(session)
    reference = copy.deepcopy(module).double().train()
    expected = F.cross_entropy(reference(torch.from_numpy(TOKENS)), torch.from_numpy(LABELS).long())
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    if name == "attention_encoder":      # its initializers are slices / transposes of the module's parameters
        for p in reference.parameters():
            p.data = p.grad
        wanted = encoder_weights(reference)
    else:
        wanted = {n: p.grad.numpy() for n, p in reference.named_parameters()}
    grads = {t.tensor_name(): t.numpy() for t in session.GetGradients()}
    assert set(grads) == set(wanted)
    largest = max(np.abs(g).max() for g in wanted.values())
    for weight, want in wanted.items():
        assert np.abs(grads[weight] - want).max() <= 1e-4 * max(np.abs(want).max(), 1e-2 * largest), weight


def test_loss_falls_when_overfitting_a_batch(zoo_model) -> None:
    session = _session(zoo_model[2], optimizer="adam", lr=0.01)
    losses = [_step(session) for _ in range(15)]
    assert losses[-1] < 0.3 * losses[0], losses
