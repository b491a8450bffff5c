"""CTCLoss: connectionist temporal classification (Graves et al. 2006), the loss of sequence recognisers whose
per-frame outputs are not aligned with their labels (a CRNN reading a text line, speech to characters).

inputs: logits [T, N, C] (time-major, unnormalised: log_softmax is applied here), labels [N, S] int32 (each row a
target sequence padded with the blank); outputs: loss (scalar) and dlogits [T, N, C]. The loss is PyTorch's
`ctc_loss(..., reduction='mean')`: each sample's -log p(labels | x) divided by its target length (at least 1),
averaged over the batch; every sample uses all T frames. An impossible alignment (a target longer than the frames
allow) gives an infinite loss, as PyTorch's does (the session judges it).

The forward (alpha) and backward (beta) variables are log-space, over the blank-extended label l' [N, 2S+1], one
vectorised update per frame; the gradient is softmax - (sum over positions s of class k of alpha_t(s) beta_t(s))
/ (p y_t(k)).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InputTensorError

F32 = np.dtype(np.float32)
NEG = -np.inf


def _logsumexp(*xs: np.ndarray) -> np.ndarray:
    top = np.maximum.reduce(xs)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(sum(np.exp(x - safe) for x in xs))


def ctc(logits: np.ndarray, labels: np.ndarray, blank: int) -> tuple[float, np.ndarray]:
    """(mean loss, d loss / d logits) in float64 for logits [T, N, C] and blank-padded labels [N, S]."""
    t_len, n, c = logits.shape
    x = logits.astype(np.float64)
    logp = x - _logsumexp(*np.moveaxis(x, 2, 0))[..., None] if c > 1 else np.zeros_like(x)
    lengths = (labels != blank).sum(axis=1)
    targets = np.where(labels != blank, labels, blank)
    targets = np.take_along_axis(targets, np.argsort(labels == blank, axis=1, kind="stable"), axis=1)  # pad last
    ext = np.full((n, 2 * labels.shape[1] + 1), blank, np.int64)
    ext[:, 1::2] = targets
    width = 2 * lengths + 1                                    # valid positions of each sample
    valid = np.arange(ext.shape[1])[None, :] < width[:, None]
    skip = np.zeros(ext.shape, bool)                           # s - 2 -> s allowed: a label unlike the one before
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = np.take_along_axis(logp, np.broadcast_to(ext[None], (t_len,) + ext.shape), axis=2)   # [T, N, L]
    emit = np.where(valid[None], emit, NEG)

    def shifted(a: np.ndarray, k: int) -> np.ndarray:
        out = np.full_like(a, NEG)
        if k > 0:
            out[:, k:] = a[:, :-k]
        else:
            out[:, :k] = a[:, -k:]
        return out

    alpha = np.full((t_len,) + ext.shape, NEG)
    alpha[0, :, :2] = emit[0, :, :2]
    for t in range(1, t_len):
        alpha[t] = _logsumexp(alpha[t - 1], shifted(alpha[t - 1], 1),
                              np.where(skip, shifted(alpha[t - 1], 2), NEG)) + emit[t]
    last = np.stack([np.take_along_axis(alpha[-1], (width - k)[:, None].clip(0), axis=1)[:, 0] for k in (1, 2)])
    last[1, width < 2] = NEG
    log_p = _logsumexp(last[0], last[1])                       # [N]
    skip_back = shifted(skip, -2)                              # s + 2 -> s allowed
    beta = np.full_like(alpha, NEG)
    rows = np.arange(n)
    beta[-1, rows, width - 1] = emit[-1, rows, width - 1]
    has_label = width >= 2
    beta[-1, rows[has_label], width[has_label] - 2] = emit[-1, rows[has_label], width[has_label] - 2]
    for t in range(t_len - 2, -1, -1):
        beta[t] = _logsumexp(beta[t + 1], shifted(beta[t + 1], -1),
                             np.where(skip_back, shifted(beta[t + 1], -2), NEG)) + emit[t]
    weight = 1.0 / (n * np.maximum(lengths, 1))
    loss = float(np.sum(-log_p * weight))
    with np.errstate(invalid="ignore"):
        occupancy = np.exp(alpha + beta - emit - log_p[None, :, None])        # [T, N, L]
    occupancy = np.where(np.isfinite(log_p)[None, :, None] & valid[None], occupancy, 0.0)
    per_class = np.zeros_like(logp)
    np.add.at(per_class, (slice(None), rows[:, None], ext), occupancy)
    grad = (np.exp(logp) - per_class) * weight[None, :, None]
    return loss, grad


@register("CTCLoss", DataType.FLOAT32)
class CTCLossKernel(Kernel):
    foldable = False

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        logits, labels = inputs[0], inputs[1] if len(inputs) > 1 else None
        if logits.rank != 3:
            raise self.error(f"logits must be [T, N, C], got {list(logits.shape)}")
        if labels is None or labels.rank != 2 or labels.shape[0] != logits.shape[1] or labels.dtype.kind not in "iu":
            raise self.error(f"labels must be integer class indices [N={logits.shape[1]}, S], got "
                             f"{None if labels is None else list(labels.shape)}", InputTensorError)
        if not 0 <= self.attrs.blank < logits.shape[2]:
            raise self.error(f"blank {self.attrs.blank} is not a class of {logits.shape[2]}", InputTensorError)
        return [TensorSpec((), F32), TensorSpec(logits.shape, F32)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        logits, labels = inputs[0], inputs[1]
        if labels.size and (labels.min() < 0 or labels.max() >= logits.shape[2]):
            raise self.error(f"labels must lie in [0, {logits.shape[2]})", InputTensorError)
        loss, grad = ctc(logits, labels, self.attrs.blank)
        outputs[0][()] = loss
        np.copyto(outputs[1], grad, casting="unsafe")
