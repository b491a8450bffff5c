"""int8 LayerNorm: the statistics in integers, the affine part folded into one float multiply-add per element.

With x = s_x (q - zp_x) the normalised value does not depend on s_x or zp_x: (x - mean) / sqrt(var + eps) =
(q - mean_q) / sqrt(var_q + eps / s_x^2). Each row's sums of q and q^2 are exact (float32 up to 1024 columns, else
float64; K var_q = sum q^2 - (sum q)^2 / K). Scale and bias stay float (constants, no activation range to share), folded with the output's
params at compile time: y_q = clamp(rint(n * scale / s_y + (bias / s_y + zp_y))). TFLite has no int8 LayerNorm
(its converter decomposes it); the float reference is the same formula on the dequantized input.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.int8.common import EXACT_F32, input_quant, output_quant
from lite.kernels.layer_norm import LayerNormKernel
from lite.status import NotSupportedError


@register("LayerNorm", DataType.INT8, quantized=True)
class LayerNormInt8Kernel(LayerNormKernel):
    inplace = False
    float_inputs = (1, 2)       # scale and bias stay float32 in a fully quantized graph (converter/quant)

    @classmethod
    def accepts(cls, attrs: Mapping[str, Any], n_outputs: int) -> bool:
        return n_outputs == 1          # the training form's mean and invstd are float statistics

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        specs = super().infer(inputs)
        if len(specs) != 1:
            raise self.error("int8 LayerNorm has one output (y)", NotSupportedError)
        qx, self.qy = input_quant(self, inputs[0]), output_quant(self, inputs[0].dtype)
        for index, what in ((1, "scale"), (2, "bias")):
            p = inputs[index] if len(inputs) > index else None
            if p is not None and (p.value is None or p.dtype != np.float32):
                raise self.error(f"int8 LayerNorm needs a constant float32 {what}", NotSupportedError)
        self.depth = int(np.prod(inputs[0].shape[self.attrs.axis % inputs[0].rank:], dtype=np.int64))
        self.eps_q = self.attrs.epsilon / qx.scale ** 2
        # sum q and sum q^2 are exact in float32 while depth * 128^2 < 2^24 (rows up to 1024), else in float64
        self.sum_dtype = np.float32 if self.depth * 128 * 128 < EXACT_F32 else np.float64
        inner = inputs[0].shape[self.attrs.axis % inputs[0].rank:]
        scale = inputs[1].value.astype(np.float64)
        bias = inputs[2].value.astype(np.float64) if len(inputs) > 2 and inputs[2] is not None else 0.0
        self.gain = np.broadcast_to(scale / self.qy.scale, inner).reshape(-1).astype(np.float32)
        self.offset = np.broadcast_to(bias / self.qy.scale + self.qy.zero_point, inner).reshape(-1).astype(np.float32)
        return specs

    def bind(self, inputs, outputs, scratch) -> None:
        self.x2d, self.out2d = inputs[0].reshape(self.rows, -1), outputs[0].reshape(self.rows, -1)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        q = self.x2d.astype(self.sum_dtype)
        total = q.sum(axis=1).astype(np.float64)                            # exact integers
        squares = np.einsum("ij,ij->i", q, q).astype(np.float64)
        var = np.maximum(squares - total * total / self.depth, 0.0) / self.depth
        invstd = (1.0 / np.sqrt(var + self.eps_q)).astype(np.float32)
        n = q.astype(np.float32, copy=False)
        n -= (total / self.depth).astype(np.float32)[:, None]
        n *= invstd[:, None]
        n *= self.gain
        n += self.offset
        np.rint(n, out=n)
        np.clip(n, self.qy.lo, self.qy.hi, out=n)
        self.out2d[...] = n
