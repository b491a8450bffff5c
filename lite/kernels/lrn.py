"""LRN with ONNX semantics on NHWC activations (channels last):
y = x / (bias + alpha / size * sum of x^2 over the `size` channels centred on c) ^ beta."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def lrn(x: np.ndarray, size: int, alpha: float, beta: float, bias: float, squares: np.ndarray,
        out: np.ndarray) -> None:
    """`squares` is a [..., C + size - 1] work buffer; window of channel c: [c - (size-1)//2, c + size//2]."""
    channels = x.shape[-1]
    before = (size - 1) // 2
    squares[..., :before] = 0
    squares[..., before + channels:] = 0
    np.square(x, out=squares[..., before:before + channels])
    np.copyto(out, squares[..., :channels])
    for k in range(1, size):
        out += squares[..., k:k + channels]
    out *= alpha / size
    out += bias
    np.power(out, -beta, out=out)
    out *= x


@register("LRN", DataType.FLOAT32)
class LRNKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank != 4:
            raise self.error(f"needs a 4-D NHWC input, got rank {x.rank}")
        if self.attrs.size < 1:
            raise self.error(f"size must be positive, got {self.attrs.size}", InvalidOpAttrError)
        self.x = x
        return [TensorSpec(x.shape, x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.x.shape[:-1] + (self.x.shape[-1] + self.attrs.size - 1,), self.x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        a = self.attrs
        lrn(inputs[0], a.size, a.alpha, a.beta, a.bias, self.work[0], outputs[0])
