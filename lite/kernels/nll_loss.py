"""NLLLoss: the negative log-likelihood of integer targets under log-probabilities, per element or reduced
(ONNX NegativeLogLikelihoodLoss; SoftmaxCrossEntropyLoss imports as LogSoftmax followed by this op).

One gather along the class axis (`take_along_axis`) and one weighted reduction: no loop over samples. A target
outside [0, C) that is not ignore_index stops the run with a status naming the node."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.unary import FLOAT_TYPES
from lite.status import InvalidOpAttrError, OpExecuteError
from schema import fb

L = fb.LossReduction


class TargetsKernel(Kernel):
    """The shape rule and the target lookup shared by NLLLoss and NLLLossGrad."""

    def check(self, x: TensorSpec, target: TensorSpec, weight: TensorSpec | None) -> None:
        if x.rank < 2 or target.shape != x.shape[:1] + x.shape[2:]:
            raise self.error(f"needs input [N, C, d...] and target [N, d...], got {list(x.shape)} and "
                             f"{list(target.shape)}")
        if target.dtype.kind not in "iu":
            raise self.error(f"target must be an integer tensor, got {target.dtype}")
        if weight is not None and weight.shape != (x.shape[1],):
            raise self.error(f"weight must have shape [{x.shape[1]}], got {list(weight.shape)}")
        if self.attrs.reduction not in (L.NONE, L.MEAN, L.SUM):
            raise self.error(f"reduction {self.attrs.reduction} is not NONE, MEAN or SUM", InvalidOpAttrError)

    def targets(self, x: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(class index of every element, 0 where ignored; its weight, 0 where ignored), both [N, d...]."""
        target = target.astype(np.int64, copy=False)
        classes = x.shape[1]
        kept = target != self.attrs.ignore_index if self.attrs.has_ignore_index else np.ones(target.shape, bool)
        if np.any(kept & ((target < 0) | (target >= classes))):
            raise self.error(f"a target lies outside [0, {classes}) and is not ignore_index", OpExecuteError)
        safe = np.where(kept, target, 0)
        weights = kept.astype(x.dtype) if weight is None else np.where(kept, weight[safe], 0).astype(x.dtype)
        return safe, weights


@register("NLLLoss", *FLOAT_TYPES)
class NLLLossKernel(TargetsKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, target = inputs[0], inputs[1]
        self.check(x, target, inputs[2] if len(inputs) > 2 else None)
        return [TensorSpec(target.shape if self.attrs.reduction == L.NONE else (), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        x = inputs[0]
        safe, weights = self.targets(x, inputs[1], inputs[2] if len(inputs) > 2 else None)
        picked = np.take_along_axis(x, safe[:, None], axis=1)[:, 0]
        loss = -picked * weights
        if self.attrs.reduction == L.NONE:
            np.copyto(outputs[0], loss)
        elif self.attrs.reduction == L.SUM:
            outputs[0][()] = loss.sum()
        else:
            with np.errstate(invalid="ignore", divide="ignore"):        # everything ignored: 0 / 0
                outputs[0][()] = loss.sum() / weights.sum()
