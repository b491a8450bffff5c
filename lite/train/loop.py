"""`TrainLoop` (MindSpore Lite r1.2): epochs of training steps over a data set, with callbacks and metrics.

A data set is any iterable of batches — tuples of arrays in the order of the session's train-mode inputs (the
model's inputs, then `labels`), such as `lite.train.Dataset`; each iteration is one epoch. A `load_func(inputs,
batch)` may replace the default loader, which resizes the session when the batch size changes and copies each
array into its input tensor. Callbacks see a `TrainLoopCallBackData`; `EpochEnd` may return RET_STOP_TRAINING
(finish this epoch, then stop) or RET_EXIT (abort: `Train` returns RET_ERROR without calling `End`). Every epoch
appends an `EpochRecord` to `loop.history` and, with `verbose`, prints one progress line (epoch, mean loss,
training accuracy for classifiers, seconds). That line already holds what the monitors' epoch lines say, so
`LossMonitor` and `ClassificationTrainAccuracyMonitor` print their own epoch line only under a quiet loop
(`verbose=False`): one line per epoch either way (their step lines are unaffected).
"""
from __future__ import annotations

import math
import os
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from lite.session import KernelCallBack
from lite.status import RET_ERROR, RET_OK, InputTensorError
from lite.tensor import MSTensor
from lite.train.session import TrainSession
from schema.train_format import LABELS, LOSS

RET_CONTINUE, RET_STOP_TRAINING, RET_EXIT = 0, 1, 2
PRINT_NEVER = 2 ** 31 - 1

Batch = Sequence[np.ndarray]
LoadDataFunc = Callable[[list[MSTensor], Batch], None]
LRLambda = Callable[[float, int], float]


def classification_hits(predictions: np.ndarray, labels: np.ndarray) -> int | None:
    """How many rows of `predictions` [N, C] have their arg-max at the label (integer class indices [N], or
    one-hot / soft labels [N, C] whose rows sum to 1); None when the data is not a classification's."""
    if predictions.ndim != 2 or predictions.shape[1] < 2:
        return None
    if labels.shape == predictions.shape and np.allclose(labels.sum(axis=1), 1, atol=1e-3):
        labels = labels.argmax(axis=1)
    if labels.shape != predictions.shape[:1] or not np.issubdtype(labels.dtype, np.integer):
        return None
    return int(np.count_nonzero(predictions.argmax(axis=1) == labels))


def load_batch(inputs: list[MSTensor], batch: Batch) -> None:
    """Copy `batch[k]` into `inputs[k]` (cast to the tensor's dtype)."""
    if len(batch) < len(inputs):
        raise InputTensorError(f"a batch of {len(batch)} arrays cannot fill the session's {len(inputs)} inputs "
                               f"({', '.join(t.tensor_name() for t in inputs)})")
    for tensor, array in zip(inputs, batch):
        tensor.set_data(np.asarray(array).astype(tensor.MutableData().dtype, copy=False))


@dataclass
class TrainLoopCallBackData:
    train_mode: bool
    epoch: int
    step: int
    loop: "TrainLoop"

    @property
    def session(self) -> TrainSession:
        return self.loop.train_session()


@dataclass
class EpochRecord:
    epoch: int                  # 1-based
    loss: float                 # mean over the epoch's steps
    accuracy: float | None      # training accuracy (classification models), else None
    seconds: float


class TrainLoopCallBack:
    """Base class: override the hooks you need."""

    def Begin(self, cb_data: TrainLoopCallBackData) -> None:
        pass

    def End(self, cb_data: TrainLoopCallBackData) -> None:
        pass

    def EpochBegin(self, cb_data: TrainLoopCallBackData) -> None:
        pass

    def EpochEnd(self, cb_data: TrainLoopCallBackData) -> int:
        return RET_CONTINUE

    def StepBegin(self, cb_data: TrainLoopCallBackData) -> None:
        pass

    def StepEnd(self, cb_data: TrainLoopCallBackData) -> None:
        pass


class Metrics(ABC):
    """An evaluation metric: `Clear`, then `Update` per batch, then `Eval` for the value."""

    @abstractmethod
    def Clear(self) -> None:
        """Forget what was seen."""

    @abstractmethod
    def Update(self, inputs: Batch, outputs: list[MSTensor]) -> None:
        """Account for one batch and the model's outputs on it."""

    @abstractmethod
    def Eval(self) -> float:
        """The metric over everything seen since `Clear`."""


class AccuracyMetrics(Metrics):
    """Classification accuracy: labels are `inputs[input_index]` of the batch (default: its last array), the
    predictions `outputs[output_index]`."""

    def __init__(self, input_index: int = -1, output_index: int = 0):
        self.input_index, self.output_index = input_index, output_index
        self.Clear()

    def Clear(self) -> None:
        self.hits, self.samples = 0, 0

    def Update(self, inputs: Batch, outputs: list[MSTensor]) -> None:
        labels = np.asarray(inputs[self.input_index])
        hits = classification_hits(outputs[self.output_index].MutableData(), labels)
        if hits is None:
            raise InputTensorError(f"AccuracyMetrics: predictions {outputs[self.output_index].shape()} and "
                                   f"labels {list(labels.shape)} are not a classification's")
        self.hits += hits
        self.samples += len(labels)

    def Eval(self) -> float:
        return self.hits / self.samples if self.samples else 0.0


def monitor_prints_epoch(cb_data: TrainLoopCallBackData) -> bool:
    """Whether a monitor prints its epoch line: not when the loop prints its own (module docstring)."""
    return not cb_data.loop.verbose


class LossMonitor(TrainLoopCallBack):
    """Prints the loss every `print_every_n` steps and, under a quiet loop, the epoch's mean loss; `losses` holds
    (epoch, mean)."""

    def __init__(self, print_every_n: int = PRINT_NEVER):
        self.print_every_n = print_every_n
        self.losses: list[tuple[int, float]] = []

    def EpochBegin(self, cb_data: TrainLoopCallBackData) -> None:
        self.total, self.steps = 0.0, 0

    def StepEnd(self, cb_data: TrainLoopCallBackData) -> None:
        loss = float(cb_data.session.GetOutputByTensorName(LOSS).MutableData())
        self.total += loss
        self.steps += 1
        if (cb_data.step + 1) % self.print_every_n == 0:
            print(f"{cb_data.epoch + 1}.{cb_data.step + 1}: Loss is {loss:.6g}")

    def EpochEnd(self, cb_data: TrainLoopCallBackData) -> int:
        mean = self.total / max(self.steps, 1)
        self.losses.append((cb_data.epoch + 1, mean))
        if monitor_prints_epoch(cb_data):
            print(f"Epoch ({cb_data.epoch + 1}):\tLoss is {mean:.6g}")
        return RET_CONTINUE


class ClassificationTrainAccuracyMonitor(TrainLoopCallBack):
    """Training accuracy from the train forward's predictions and the `labels` input; prints every
    `print_every_n` steps and, under a quiet loop, per epoch; `accuracies` holds (epoch, accuracy)."""

    def __init__(self, print_every_n: int = PRINT_NEVER):
        self.print_every_n = print_every_n
        self.accuracies: list[tuple[int, float]] = []

    def EpochBegin(self, cb_data: TrainLoopCallBackData) -> None:
        self.hits, self.samples = 0, 0

    def StepEnd(self, cb_data: TrainLoopCallBackData) -> None:
        session = cb_data.session
        labels = session.GetInputsByTensorName(LABELS).MutableData()
        hits = classification_hits(session.GetPredictions()[0].MutableData(), labels)
        if hits is None:
            return
        self.hits += hits
        self.samples += len(labels)
        if (cb_data.step + 1) % self.print_every_n == 0:
            print(f"{cb_data.epoch + 1}.{cb_data.step + 1}: Training Accuracy is {hits / len(labels):.4f}")

    def EpochEnd(self, cb_data: TrainLoopCallBackData) -> int:
        accuracy = self.hits / max(self.samples, 1)
        self.accuracies.append((cb_data.epoch + 1, accuracy))
        if monitor_prints_epoch(cb_data):
            print(f"Epoch ({cb_data.epoch + 1}):\tTraining Accuracy is {accuracy:.4f}")
        return RET_CONTINUE


class StepLRLambda:
    """lr * gamma at the end of every `step_size`-th epoch."""

    def __init__(self, step_size: int, gamma: float):
        self.step_size, self.gamma = step_size, gamma

    def __call__(self, lr: float, epoch: int) -> float:
        return lr * self.gamma if (epoch + 1) % self.step_size == 0 else lr


class MultiplicativeLRLambda:
    """lr * multiplier at every call."""

    def __init__(self, multiplier: float):
        self.multiplier = multiplier

    def __call__(self, lr: float, epoch: int) -> float:
        return lr * self.multiplier


class LRScheduler(TrainLoopCallBack):
    """Every `step` epochs, at the epoch's end: lr = lambda_func(lr, epoch) (epoch 0-based)."""

    def __init__(self, lambda_func: LRLambda, step: int = 1):
        self.lambda_func, self.step = lambda_func, step

    def EpochEnd(self, cb_data: TrainLoopCallBackData) -> int:
        if (cb_data.epoch + 1) % self.step == 0:
            session = cb_data.session
            session.SetLearningRate(self.lambda_func(session.GetLearningRate(), cb_data.epoch))
        return RET_CONTINUE


class CkptSaver(TrainLoopCallBack):
    """Every `every_n` epochs, a checkpoint `<prefix>_trained_<epoch>.ms` (1-based epoch, written atomically)."""

    def __init__(self, every_n: int, prefix: str | os.PathLike):
        self.every_n, self.prefix = every_n, os.fspath(prefix)

    def EpochEnd(self, cb_data: TrainLoopCallBackData) -> int:
        if (cb_data.epoch + 1) % self.every_n == 0:
            cb_data.session.SaveToFile(f"{self.prefix}_trained_{cb_data.epoch + 1}.ms")
        return RET_CONTINUE


class TrainLoop:
    """Runs a `TrainSession` over a data set: `Train(epochs, dataset, callbacks)`, `Eval(dataset, metrics)`."""

    def __init__(self, session: TrainSession, verbose: bool = True):
        self.session, self.verbose = session, verbose
        self.epoch = 0
        self.history: list[EpochRecord] = []
        self.before: KernelCallBack | None = None
        self.after: KernelCallBack | None = None

    @staticmethod
    def CreateTrainLoop(session: TrainSession) -> "TrainLoop":
        return TrainLoop(session)

    def train_session(self) -> TrainSession:
        return self.session

    def Reset(self) -> int:
        """Start counting epochs from 0 again."""
        self.epoch = 0
        return RET_OK

    def SetKernelCallBack(self, before: KernelCallBack | None, after: KernelCallBack | None) -> int:
        """Per-node callbacks passed to every `RunGraph`."""
        self.before, self.after = before, after
        return RET_OK

    def _load(self, batch: Batch, load_func: LoadDataFunc | None) -> None:
        inputs = self.session.GetInputs()
        shapes = [list(np.shape(a)) for a in batch[:len(inputs)]]
        if len(shapes) == len(inputs) and shapes != [t.shape() for t in inputs]:
            self.session.Resize(inputs, shapes)
        (load_func or load_batch)(inputs, batch)

    def Train(self, epochs: int, dataset: Iterable[Batch], callbacks: Sequence[TrainLoopCallBack] = (),
              load_func: LoadDataFunc | None = None) -> int:
        """Train for `epochs` epochs; returns RET_OK (also when a callback stopped training), RET_ERROR when a
        callback aborted it."""
        self.session.Train()
        data = TrainLoopCallBackData(True, self.epoch, 0, self)
        for cb in callbacks:
            cb.Begin(data)
        for _ in range(epochs):
            data.epoch, data.step = self.epoch, 0
            for cb in callbacks:
                cb.EpochBegin(data)
            status = self._train_epoch(dataset, callbacks, load_func, data)
            self.epoch += 1
            if status == RET_EXIT:
                return RET_ERROR
            if status == RET_STOP_TRAINING:
                break
        for cb in callbacks:
            cb.End(data)
        return RET_OK

    def _train_epoch(self, dataset: Iterable[Batch], callbacks: Sequence[TrainLoopCallBack],
                     load_func: LoadDataFunc | None, data: TrainLoopCallBackData) -> int:
        started, total_loss, hits, samples, steps = time.perf_counter(), 0.0, 0, 0, 0
        for step, batch in enumerate(dataset):
            data.step = step
            for cb in callbacks:
                cb.StepBegin(data)
            self._load(batch, load_func)
            self.session.RunGraph(self.before, self.after)
            total_loss += float(self.session.GetOutputByTensorName(LOSS).MutableData())
            steps += 1
            batch_hits = classification_hits(self.session.GetPredictions()[0].MutableData(), np.asarray(batch[-1]))
            if batch_hits is not None:
                hits, samples = hits + batch_hits, samples + len(batch[-1])
            for cb in callbacks:
                cb.StepEnd(data)
        record = EpochRecord(data.epoch + 1, total_loss / steps if steps else math.nan,
                             hits / samples if samples else None, time.perf_counter() - started)
        self.history.append(record)
        if self.verbose:
            accuracy = f", train accuracy {record.accuracy:.2%}" if record.accuracy is not None else ""
            print(f"epoch {record.epoch}: loss {record.loss:.4f}{accuracy}, {record.seconds:.1f} s", flush=True)
        statuses = [cb.EpochEnd(data) for cb in callbacks]
        return max(statuses, default=RET_CONTINUE)

    def Eval(self, dataset: Iterable[Batch], metrics: Sequence[Metrics] | None = None,
             load_func: LoadDataFunc | None = None) -> list[float]:
        """Run the eval forward over `dataset`; returns each metric's value (default: [accuracy])."""
        metrics = list(metrics) if metrics is not None else [AccuracyMetrics()]
        self.session.Eval()
        for m in metrics:
            m.Clear()
        for batch in dataset:
            self._load(batch, load_func)
            self.session.RunGraph(self.before, self.after)
            outputs = self.session.GetPredictions()
            for m in metrics:
                m.Update(batch, outputs)
        return [m.Eval() for m in metrics]
