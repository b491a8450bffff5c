"""LayerNorm: normalise over axes [axis, rank) then scale (and shift): y = (x - mean) / sqrt(var + eps) * s + b;
scale and bias broadcast against the normalised trailing shape."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def layer_norm(x2d: np.ndarray, epsilon: float, out2d: np.ndarray) -> None:
    """Normalise each row of x [M, K] into out [M, K]; out may be x."""
    np.subtract(x2d, x2d.mean(axis=1, keepdims=True), out=out2d)
    var = np.einsum("ij,ij->i", out2d, out2d) / x2d.shape[1]      # no full-size temporary
    out2d *= (1.0 / np.sqrt(var + epsilon)).astype(x2d.dtype)[:, None]


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
        self.rows = int(np.prod(x.shape[:axis], dtype=np.int64))
        return [TensorSpec(x.shape, x.dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        x, out = inputs[0], outputs[0]
        self.x2d, self.out2d = x.reshape(self.rows, -1), out.reshape(self.rows, -1)
        self.scale = inputs[1]
        self.bias = inputs[2] if len(inputs) > 2 else None

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        layer_norm(self.x2d, self.attrs.epsilon, self.out2d)
        out = outputs[0]
        out *= self.scale
        if self.bias is not None:
            out += self.bias
