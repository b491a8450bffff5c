"""NLLLossGrad: the loss reads one log-probability per element, so dx is zero but at each element's target class,
where it is -weight[target] * dy (divided by the weight total for MEAN; ignored elements get nothing)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.nll_loss import TargetsKernel
from schema import fb

L = fb.LossReduction


@register("NLLLossGrad", DataType.FLOAT32)
class NLLLossGradKernel(TargetsKernel):
    """inputs: dy (the loss's shape), x [N, C, d...], target [N, d...], weight? [C] -> dx [N, C, d...]."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, target = inputs[:3]
        self.check(x, target, inputs[3] if len(inputs) > 3 else None)
        if dy.shape != (target.shape if self.attrs.reduction == L.NONE else ()):
            raise self.error(f"dy {list(dy.shape)} is not the loss's shape")
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        dy, x = inputs[:2]
        safe, weights = self.targets(x, inputs[2], inputs[3] if len(inputs) > 3 else None)
        if self.attrs.reduction == L.MEAN:
            with np.errstate(invalid="ignore", divide="ignore"):        # everything ignored: 0 / 0, as the loss
                weights = weights / weights.sum()
        dx = outputs[0]
        dx.fill(0)
        np.put_along_axis(dx, safe[:, None], (-weights * dy)[:, None], axis=1)
