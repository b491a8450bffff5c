"""LayerNorm: normalise over axes [axis, rank) then scale (and shift): y = (x - mean) / sqrt(var + eps) * s + b;
scale and bias broadcast against the normalised trailing shape.

Optional outputs mean and invstd = 1 / sqrt(var + eps) (ONNX's Mean / InvStdDev, shape x.shape[:axis] followed by
ones) are what LayerNormGrad reads in a training graph.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import row_sums
from lite.status import InvalidOpAttrError
from lite.traits import TrainMode, declare


def layer_norm(x2d: np.ndarray, epsilon: float, out2d: np.ndarray, mean: np.ndarray | None = None,
               invstd: np.ndarray | None = None) -> None:
    """Normalise each row of x [M, K] into out [M, K] (out may be x); `mean` / `invstd` [M] get the row
    statistics when given."""
    mean = np.empty(x2d.shape[0], x2d.dtype) if mean is None else mean
    invstd = np.empty(x2d.shape[0], x2d.dtype) if invstd is None else invstd
    row_sums(x2d, mean)
    mean /= x2d.shape[1]
    np.subtract(x2d, mean[:, None], out=out2d)
    np.einsum("ij,ij->i", out2d, out2d, out=invstd)        # no full-size temporary
    invstd /= x2d.shape[1]
    invstd += epsilon
    np.sqrt(invstd, out=invstd)
    np.reciprocal(invstd, out=invstd)
    out2d *= invstd[:, None]


declare("LayerNorm", train=TrainMode(outputs=("mean", "invstd")))


@register("LayerNorm", DataType.FLOAT32)
class LayerNormKernel(Kernel):
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, scale = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        axis = self.attrs.axis % x.rank
        inner = x.shape[axis:]
        for name, p in (("scale", scale), ("bias", bias)):
            if p is not None and np.broadcast_shapes(inner, p.shape) != inner:
                raise self.error(f"{name} {list(p.shape)} does not broadcast to the normalised shape {list(inner)}")
        if len(self.node.outputs) not in (1, 3):
            raise self.error(f"has outputs y or y, mean, invstd, not {len(self.node.outputs)}")
        self.rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        stat = TensorSpec(x.shape[:axis] + (1,) * len(inner), x.dtype)
        return [TensorSpec(x.shape, x.dtype)] + [stat, stat] * (len(self.node.outputs) == 3)

    def bind(self, inputs, outputs, scratch) -> None:
        x, out = inputs[0], outputs[0]
        self.x2d, self.out2d = x.reshape(self.rows, -1), out.reshape(self.rows, -1)
        self.stats = [s.reshape(self.rows) for s in outputs[1:]] or [None, None]
        self.scale = inputs[1]
        self.bias = inputs[2] if len(inputs) > 2 else None

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        layer_norm(self.x2d, self.attrs.epsilon, self.out2d, *self.stats)
        out = outputs[0]
        out *= self.scale
        if self.bias is not None:
            out += self.bias
