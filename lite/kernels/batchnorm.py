"""Inference BatchNorm: y = (x - mean) / sqrt(var + eps) * scale + bias along the channel axis `axis`.

With constant statistics the affine form y = x * k + c is computed once at bind; statistics fed at run time
(as in the ONNX node tests) are folded per run, a cost of O(channels).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def batchnorm_affine(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float,
                     shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(k, c) with y = x * k + c, each reshaped to `shape` to broadcast along the channel axis."""
    k = scale.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    c = bias - mean * k
    return k.astype(np.float32).reshape(shape), c.astype(np.float32).reshape(shape)


@register("BatchNorm", DataType.FLOAT32)
class BatchNormKernel(Kernel):
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, params = inputs[0], inputs[1:5]
        if len(params) != 4 or any(p is None for p in params):
            raise self.error("needs inputs x, scale, bias, mean and variance")
        if x.rank < 2:
            raise self.error(f"needs an input of rank >= 2, got {list(x.shape)}")
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        axis = self.attrs.axis % x.rank
        channels = x.shape[axis]
        if any(p.shape != (channels,) for p in params):
            raise self.error(f"scale, bias, mean and variance must have shape [{channels}], got "
                             f"{[list(p.shape) for p in params]}")
        self.param_shape = (channels,) + (1,) * (x.rank - 1 - axis)
        self.const_params = all(p.value is not None for p in params)
        return [TensorSpec(x.shape, x.dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        self.params = inputs[1:5]
        if self.const_params:
            self.affine = batchnorm_affine(*self.params, self.attrs.epsilon, self.param_shape)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        k, c = self.affine if self.const_params else \
            batchnorm_affine(*self.params, self.attrs.epsilon, self.param_shape)
        out = outputs[0]
        np.multiply(inputs[0], k, out=out)
        out += c
