"""The sequence models of the zoo (`models/sequence.py`), exported by PyTorch: each converts and matches
onnxruntime, its first training step (loss and every weight gradient) matches PyTorch autograd, its loss falls
when overfitting one batch, and a streaming GRU fed its own state over 100 chunks matches onnxruntime chunk by
chunk."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F

from converter.train import TrainParams
from models import sequence
from tests.util import relative_to_range, run_lite, run_ort, session_for, train_session_for, train_step

N = 4
KWS = dict(frames=12, features=10, hidden=16, num_classes=6)
CRNN = dict(width=16, hidden=16, num_classes=11)
LABEL_LENGTH = 2


def _kws_case(cell: str):
    builder = sequence.kws_gru if cell == "GRU" else sequence.kws_lstm
    module = sequence.kws_module(cell, KWS["num_classes"], KWS["features"], KWS["hidden"])
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, KWS["frames"], KWS["features"])).astype(np.float32)
    labels = rng.integers(0, KWS["num_classes"], N).astype(np.int32)
    loss = lambda out: F.cross_entropy(out, torch.from_numpy(labels).long())      # noqa: E731
    return builder(batch=N, **KWS), module, x, labels, TrainParams(optimizer="adam", learning_rate=0.02), loss


def _crnn_case(_: str = ""):
    module = sequence.crnn_module(CRNN["num_classes"], CRNN["hidden"])
    rng = np.random.default_rng(2)
    x = rng.standard_normal((N, 1, 32, CRNN["width"])).astype(np.float32)
    labels = np.zeros((N, LABEL_LENGTH), np.int32)
    for row, length in zip(labels, [2, 1, 2, 1]):
        row[:length] = rng.integers(1, CRNN["num_classes"], length)
    t = CRNN["width"] // 4

    def loss(out: torch.Tensor) -> torch.Tensor:
        lengths = torch.from_numpy((labels != 0).sum(1))
        return F.ctc_loss(F.log_softmax(out, 2), torch.from_numpy(labels).long(), torch.full((N,), t), lengths)

    params = TrainParams(loss="ctc", label_length=LABEL_LENGTH, learning_rate=0.03, optimizer="adam")
    return sequence.crnn(batch=N, **CRNN), module, x, labels, params, loss


CASES = {"kws_gru": lambda: _kws_case("GRU"), "kws_lstm": lambda: _kws_case("LSTM"), "crnn": _crnn_case}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    return request.param, CASES[request.param]()


def test_converts_and_matches_onnxruntime(case):
    _, (model, _, x, *_) = case
    got, want = run_lite(session_for(model), {"input": x}), run_ort(model, {"input": x})
    assert got["logits"].shape == want["logits"].shape
    assert relative_to_range(got["logits"], want["logits"]) <= 1e-4


def test_first_training_step_matches_pytorch(case):
    _, (model, module, x, labels, params, loss_fn) = case
    session = train_session_for(model, params)
    loss = train_step(session, x, labels)
    reference = module.double().train()
    expected = loss_fn(reference(torch.from_numpy(x).double()))
    expected.backward()
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    grads = {t.tensor_name(): t.numpy() for t in session.GetGradients()}
    wanted = {name: p.grad.numpy() for name, p in reference.named_parameters()}
    assert set(wanted) <= set(grads)
    largest = max(np.abs(g).max() for g in wanted.values())
    for name, want in wanted.items():   # a conv bias before a train-mode BatchNorm has a gradient of exactly 0
        assert np.abs(grads[name] - want).max() <= 1e-4 * max(np.abs(want).max(), 1e-2 * largest), name


def test_loss_falls_when_overfitting_one_batch(case):
    _, (model, _, x, labels, params, _) = case
    session = train_session_for(model, params)
    losses = [train_step(session, x, labels) for _ in range(12)]
    assert losses[-1] < 0.5 * losses[0], losses


def test_streaming_state_fed_back_over_100_chunks_matches_onnxruntime():
    hidden, chunk = 16, 3
    model = sequence.streaming_gru(num_classes=5, chunk=chunk, features=8, hidden=hidden)
    session = session_for(model)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    oracle = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    ours = theirs = np.zeros((2, 1, hidden), np.float32)
    for k in range(100):
        x = rng.standard_normal((1, chunk, 8)).astype(np.float32)
        got = run_lite(session, {"input": x, "state": ours})
        want = dict(zip(("logits", "next_state"), oracle.run(["logits", "next_state"], {"input": x, "state": theirs})))
        for name in ("logits", "next_state"):
            assert relative_to_range(got[name], want[name]) <= 1e-4, (k, name)
        ours, theirs = got["next_state"], want["next_state"]
