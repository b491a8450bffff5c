"""Losses of training graphs: SoftmaxCrossEntropyWithLogits, SparseSoftmaxCrossEntropyWithLogits,
BinaryCrossEntropy, SmoothL1Loss, MSELoss. float32.

inputs: prediction (logits), labels; outputs: loss (shape (), the batch mean exactly as PyTorch's default
`reduction='mean'`: over samples for cross-entropy, over every element otherwise) and the gradient of the loss
with respect to the prediction. Labels of the wrong shape (at compile time) or, for class indices, outside
[0, C) (at run time) raise InputTensorError. A NaN or infinite loss is a value here, not an error: the session
judges it.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InputTensorError, InvalidOpAttrError

F32 = np.dtype(np.float32)


def log_softmax_rows(logits: np.ndarray, logp: np.ndarray, prob: np.ndarray, row: np.ndarray) -> None:
    """logp = log softmax and prob = softmax of each row of `logits` [N, C], shifted by the row max (no
    overflow); `row` [N, 1] is work space."""
    np.max(logits, axis=1, keepdims=True, out=row)
    np.subtract(logits, row, out=logp)
    np.exp(logp, out=prob)
    np.sum(prob, axis=1, keepdims=True, out=row)
    prob /= row
    np.log(row, out=row)
    logp -= row


class LossKernel(Kernel):
    """Shared shape rule: prediction [N, C] for cross-entropy (any shape otherwise), labels of `label_shape`
    and a dtype of `label_kinds`."""
    two_d = False
    label_kinds = "f"

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        pred, labels = inputs[0], inputs[1] if len(inputs) > 1 else None
        if self.two_d and pred.rank != 2:
            raise self.error(f"logits must be [N, C], got {list(pred.shape)}")
        if labels is None:
            raise self.error("the labels input is missing", InputTensorError)
        want = self.label_shape(pred)
        if labels.shape != want:
            raise self.error(f"labels tensor has shape {list(labels.shape)}, the loss needs {list(want)}",
                             InputTensorError)
        if labels.dtype.kind not in self.label_kinds:
            raise self.error(f"labels tensor has dtype {labels.dtype}, the loss needs "
                             f"{'integer class indices' if 'i' in self.label_kinds else 'float values'}",
                             InputTensorError)
        self.count = max(pred.shape[0] if self.two_d else int(np.prod(pred.shape, dtype=np.int64)), 1)
        self.shape = pred.shape
        return [TensorSpec((), F32), TensorSpec(pred.shape, F32)]

    def label_shape(self, pred: TensorSpec) -> tuple[int, ...]:
        return pred.shape


@register("SoftmaxCrossEntropyWithLogits", DataType.FLOAT32)
class SoftmaxCrossEntropyKernel(LossKernel):
    """logits [N, C], labels [N, C] (one-hot or soft, float32): loss = mean_n -sum_c labels * log softmax(logits);
    dlogits = (softmax * sum_c labels - labels) / N."""
    two_d = True

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shape, F32), TensorSpec((self.shape[0], 1), F32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        logits, labels = inputs[0], inputs[1]
        loss, dlogits = outputs
        logp, row = self.work
        log_softmax_rows(logits, logp, dlogits, row)
        loss[()] = -np.vdot(labels, logp) / self.count
        np.sum(labels, axis=1, keepdims=True, out=row)
        dlogits *= row
        dlogits -= labels
        dlogits /= self.count


@register("SparseSoftmaxCrossEntropyWithLogits", DataType.FLOAT32)
class SparseSoftmaxCrossEntropyKernel(LossKernel):
    """logits [N, C], labels [N] (class indices in [0, C), int32): loss = mean_n -log softmax(logits)[n, label_n];
    dlogits = (softmax - onehot(labels)) / N."""
    two_d = True
    label_kinds = "iu"

    def label_shape(self, pred: TensorSpec) -> tuple[int, ...]:
        return pred.shape[:1]

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        specs = super().infer(inputs)
        self.rows = np.arange(self.shape[0])
        return specs

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shape, F32), TensorSpec((self.shape[0], 1), F32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        logits, labels = inputs[0], inputs[1]
        loss, dlogits = outputs
        classes = self.shape[1]
        if labels.size and (labels.min() < 0 or labels.max() >= classes):
            raise self.error(f"labels tensor holds class indices in [{labels.min()}, {labels.max()}], outside "
                             f"[0, {classes})", InputTensorError)
        logp, row = self.work
        log_softmax_rows(logits, logp, dlogits, row)
        loss[()] = -np.sum(logp[self.rows, labels], dtype=np.float32) / self.count
        dlogits[self.rows, labels] -= 1
        dlogits /= self.count


@register("BinaryCrossEntropy", DataType.FLOAT32)
class BinaryCrossEntropyKernel(LossKernel):
    """logits x, targets t in [0, 1] (same shape): loss = mean(max(x, 0) - x t + log(1 + exp(-|x|))), the
    stable form of binary cross-entropy on sigmoid(x); dlogits = (sigmoid(x) - t) / numel."""

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shape, F32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, t = inputs[0], inputs[1]
        loss, dx = outputs
        e = self.work[0]
        np.abs(x, out=e)
        np.negative(e, out=e)
        np.exp(e, out=e)                                  # e = exp(-|x|) in (0, 1]
        np.add(e, 1, out=dx)
        np.reciprocal(dx, out=dx)                         # 1 / (1 + e): sigmoid(|x|)
        np.multiply(dx, e, out=dx, where=x < 0)           # sigmoid(x) = e / (1 + e) for x < 0
        np.log1p(e, out=e)
        total = np.sum(e) - np.vdot(x, t)
        total += np.sum(np.maximum(x, 0, out=e))
        loss[()] = total / self.count
        dx -= t
        dx /= self.count


@register("SmoothL1Loss", DataType.FLOAT32)
class SmoothL1LossKernel(LossKernel):
    """prediction p, target t (same shape), d = p - t: loss = mean(0.5 d^2 / beta if |d| < beta else
    |d| - 0.5 beta), L1 when beta = 0 (PyTorch). With s = clip(d / beta, -1, 1) (sign d for beta = 0) the
    elementwise loss is s d - 0.5 beta s^2 and the gradient s / numel."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        if self.attrs.beta < 0:
            raise self.error(f"beta must be >= 0, got {self.attrs.beta}", InvalidOpAttrError)
        return super().infer(inputs)

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shape, F32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        loss, dp = outputs
        beta, d = self.attrs.beta, self.work[0]
        np.subtract(inputs[0], inputs[1], out=d)
        if beta > 0:
            np.divide(d, beta, out=dp)
            np.clip(dp, -1, 1, out=dp)
        else:
            np.sign(d, out=dp)
        loss[()] = (np.vdot(dp, d) - 0.5 * beta * np.vdot(dp, dp)) / self.count
        dp /= self.count


@register("MSELoss", DataType.FLOAT32)
class MSELossKernel(LossKernel):
    """prediction p, target t (same shape): loss = mean((p - t)^2); dp = 2 (p - t) / numel."""

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        loss, dp = outputs
        np.subtract(inputs[0], inputs[1], out=dp)
        loss[()] = np.vdot(dp, dp) / self.count
        dp *= 2.0 / self.count
