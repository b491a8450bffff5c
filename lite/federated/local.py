"""What a client does on its own data in one round, with no Flower in sight: local epochs with `TrainLoop` and
evaluation in `Eval()` mode. The client app, the server's central evaluation and the centralised baseline all
run through here, so a federated result and its baseline differ only in how the weights were averaged."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from lite.context import Context
from lite.status import ParamInvalidError
from lite.tensor import MSTensor
from lite.train.dataset import Dataset
from lite.train.loop import AccuracyMetrics, Batch, Metrics, TrainLoop
from lite.train.session import TrainSession


@dataclass
class LocalResult:
    loss: float             # mean training loss over the local steps (eval: cross-entropy of the predictions)
    accuracy: float         # training accuracy over the local steps (eval: test accuracy)
    examples: int           # examples the client holds: the weight of its update in FedAvg


class CrossEntropyMetrics(Metrics):
    """Mean softmax cross-entropy of the predictions (logits) against integer labels (the batch's last array)."""

    def Clear(self) -> None:
        self.total, self.samples = 0.0, 0

    def Update(self, inputs: Batch, outputs: list[MSTensor]) -> None:
        logits = outputs[0].MutableData().astype(np.float64)
        labels = np.asarray(inputs[-1]).astype(np.int64)
        shifted = logits - logits.max(axis=1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        self.total -= float(log_probs[np.arange(len(labels)), labels].sum())
        self.samples += len(labels)

    def Eval(self) -> float:
        return self.total / self.samples if self.samples else 0.0


def open_session(model: str | os.PathLike, threads: int = 1, kernels: str = "auto") -> TrainSession:
    """A fresh `TrainSession` over a training `.ms` file (weights as stored, optimizer state as stored).
    `kernels` is `Context.kernels`: "numpy" spares a short-lived process loading numba (about 3 s of CPU),
    which a small model's few local steps never earn back."""
    return TrainSession.CreateSession(os.fspath(model), Context(thread_num=threads, kernels=kernels))


def train_locally(session: TrainSession, x: np.ndarray, y: np.ndarray, *, epochs: int, batch_size: int,
                  learning_rate: float, seed: int) -> LocalResult:
    """`epochs` passes over (x, y) in shuffled batches of `batch_size` (a short last batch is dropped, so the
    session is never recompiled), at `learning_rate`."""
    if epochs < 1 or batch_size < 1 or len(x) < batch_size:
        raise ParamInvalidError(f"local training needs epochs >= 1 and at least one batch of {batch_size} "
                                f"examples, got epochs={epochs} and {len(x)} examples")
    session.SetLearningRate(learning_rate)
    loop = TrainLoop(session, verbose=False)
    loop.Train(epochs, Dataset(x, y, batch_size=batch_size, shuffle=True, seed=seed, drop_last=True))
    return LocalResult(float(np.mean([r.loss for r in loop.history])),
                       float(np.mean([r.accuracy or 0.0 for r in loop.history])), len(x))


def evaluate_locally(session: TrainSession, x: np.ndarray, y: np.ndarray, batch_size: int = 500) -> LocalResult:
    """Accuracy and cross-entropy of the session's current weights on (x, y), in `Eval()` mode."""
    accuracy, loss = TrainLoop(session, verbose=False).Eval(Dataset(x, y, batch_size=batch_size),
                                                             [AccuracyMetrics(), CrossEntropyMetrics()])
    return LocalResult(loss, accuracy, len(x))
