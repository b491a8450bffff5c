"""ReduceGrad: the gradient of Reduce over the forward's own reduced axes."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.reduce import ReduceKernel
from lite.status import NotSupportedError
from schema import fb


M = fb.ReduceMode


def _l2_slope(x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
    """x / ||x||, 0 where the norm is 0 (PyTorch's subgradient)."""
    np.divide(x, y, out=out, where=y != 0)
    out[np.broadcast_to(y == 0, out.shape)] = 0.0


# d y / d x from the forward input x and output y (y broadcast to x's shape with the reduced dims kept as 1)
_FROM_X_AND_Y: dict[int, Callable[[np.ndarray, np.ndarray, np.ndarray], None]] = {
    M.L1: lambda x, y, out: np.sign(x, out=out),
    M.L2: _l2_slope,
    M.SUM_SQUARE: lambda x, y, out: np.multiply(x, 2.0, out=out),
    M.LOG_SUM: lambda x, y, out: np.copyto(out, np.exp(-y)),                    # 1 / sum(x)
    M.LOG_SUM_EXP: lambda x, y, out: np.exp(np.subtract(x, y, out=out), out=out),   # softmax(x)
}


@register("ReduceGrad", DataType.FLOAT32)
class ReduceGradKernel(ReduceKernel):
    """inputs: dy (Reduce's output shape), x, y (the forward input and output), axes? -> dx (x's shape).

    SUM spreads dy over the reduced axes, MEAN spreads dy / count, MAX and MIN give dy to the positions holding
    the extreme, split equally between ties (as PyTorch's amax / amin); L1, L2, SUM_SQUARE, LOG_SUM and
    LOG_SUM_EXP scale dy by their derivative from x and y. The axes rule is the forward's."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, y = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
        axes = self._axes(x, inputs[3] if len(inputs) > 3 else None) or ()
        self.axes, self.kept = axes, tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        forward_shape = self.kept if self.attrs.keep_dims or not axes else tuple(
            d for a, d in enumerate(x.shape) if a not in axes)
        if dy.shape != forward_shape:
            raise self.error(f"dy {list(dy.shape)} is not the shape {list(forward_shape)} Reduce produces")
        mode = self.attrs.mode
        if mode not in (M.SUM, M.MEAN, M.MAX, M.MIN) and mode not in _FROM_X_AND_Y:
            raise self.error(f"no gradient for reduce mode {mode}", NotSupportedError)
        if mode not in (M.SUM, M.MEAN) and (y is None or y.shape != dy.shape):
            raise self.error(f"reduce mode {mode} needs the forward output y of dy's shape as input 2")
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        self.scale = 1.0 / count if mode == M.MEAN and count else 1.0
        self.extreme = mode in (M.MAX, M.MIN)
        return [TensorSpec(x.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.kept, np.dtype(np.float32))] if self.extreme else []

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        dy, x, dx = inputs[0].reshape(self.kept), inputs[1], outputs[0]
        if self.attrs.mode in _FROM_X_AND_Y:
            _FROM_X_AND_Y[self.attrs.mode](x, inputs[2].reshape(self.kept), dx)
            dx *= dy
            return
        if not self.extreme:
            np.multiply(dy, self.scale, out=dx)
            return
        share = self.work[0]
        np.equal(x, inputs[2].reshape(self.kept), out=dx)          # 1 where x holds the extreme
        np.add.reduce(dx, axis=self.axes, keepdims=True, out=share)
        np.divide(dy, share, out=share)
        dx *= share
