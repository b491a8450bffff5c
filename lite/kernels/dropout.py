"""Dropout. Inference: the identity (computed in place when the planner allows).

Training (`training = true`, outputs y, mask): mask = Bernoulli(1 - ratio) / (1 - ratio), drawn from `self.rng`
(the session seeds it before every step; `np.random.default_rng(0)` otherwise), and y = x * mask — PyTorch's
CPU formulation, so DropoutGrad is dx = dy * mask. Never folded: it is random.

Run-time mode (inputs x, ratio, training_mode, as ONNX's Dropout-12 with graph inputs; outputs y, bool mask):
when training_mode is false or ratio is 0, y = x and the mask is all true; otherwise the mask keeps each
element with probability 1 - ratio and y = x * mask / (1 - ratio).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.identity import IdentityKernel
from lite.model import NodeDef
from lite.status import InvalidOpAttrError
from lite.traits import ALWAYS, ELEMENTWISE, Layout, TrainMode, declare


def draw_mask(rng: np.random.Generator, ratio: float, mask: np.ndarray) -> None:
    """mask = 1 / (1 - ratio) with probability 1 - ratio, else 0 (all zeros when ratio is 1)."""
    rng.random(out=mask, dtype=mask.dtype)
    np.greater_equal(mask, ratio, out=mask)
    mask *= 1.0 / (1.0 - ratio) if ratio < 1 else 0.0


declare("Dropout", layout=Layout(ELEMENTWISE), noop=ALWAYS,
        train=TrainMode(outputs=("mask",), flag=True, random=True))


@register("Dropout")
class DropoutKernel(IdentityKernel):
    def __init__(self, node: NodeDef):
        super().__init__(node)
        self.training = bool(self.attrs.training)
        self.foldable = not self.training
        self.rng = np.random.default_rng(0)

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        self.runtime = len(inputs) > 1       # ratio / training_mode inputs: read while running, never folded
        self.foldable = not (self.training or self.runtime)
        if self.runtime:
            x = inputs[0]
            return [TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, np.dtype(np.bool_))]
        if not self.training:
            return super().infer(inputs)
        x, ratio = inputs[0], self.attrs.ratio
        if x.dtype != np.float32:
            raise self.error(f"training Dropout needs a float32 input, got {x.dtype}")
        if not 0 <= ratio <= 1:
            raise self.error(f"ratio must lie in [0, 1], got {ratio}", InvalidOpAttrError)
        return [TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, x.dtype)]

    def idle(self) -> bool:
        """Only the inference identity may be skipped: a training or run-time Dropout draws a mask every run."""
        return not (self.training or self.runtime) and super().idle()

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.runtime:
            self._run_runtime(inputs, outputs)
            return
        if not self.training:
            super().run(inputs, outputs)
            return
        draw_mask(self.rng, self.attrs.ratio, outputs[1])
        np.multiply(inputs[0], outputs[1], out=outputs[0])

    def _run_runtime(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, y, mask = inputs[0], outputs[0], outputs[1]
        ratio = float(inputs[1].ravel()[0]) if inputs[1] is not None and inputs[1].size else 0.5
        training = len(inputs) > 2 and inputs[2] is not None and inputs[2].size and bool(inputs[2].ravel()[0])
        if not 0 <= ratio < 1 or not np.isfinite(ratio):
            raise self.error(f"ratio must lie in [0, 1), got {ratio}", InvalidOpAttrError)
        if not training or ratio == 0:
            np.copyto(y, x)
            mask.fill(True)
            return
        np.greater_equal(self.rng.random(x.shape, dtype=np.float32), ratio, out=mask)
        np.multiply(x, mask, out=y)
        y *= np.asarray(1.0 / (1.0 - ratio), y.dtype)
