"""Dynamic quantization (MindSpore Lite's DYNAMIC_QUANT): a FullConnection node of quant type DYNAMIC keeps a
float32 input and output, and an int8 weight quantized per output channel (symmetric) by the converter. At every
run the kernel quantizes each row of its input (a token) to uint8 with DynamicQuantizeLinear's rule over that row
(range [min(x, 0), max(x, 0)] onto [0, 255], rounding half to even, all in float32), multiplies in integers and
scales back:

    y[m, n] = float32(sum_k (q[m, k] - z[m]) w[n, k]) * (s[m] * s_w[n]) + b[n]     (then residual, activation)

Per row, not per tensor: on all-MiniLM-L6-v2 the sentence embeddings' cosine to float is 0.9985 (worst of 16
sentences) with per-row ranges against 0.9889 with one range per tensor, the outliers of a few tokens widening
every token's step. The products are exact (float64 BLAS here; int32 in the compiled sibling, which gives the same
float32 results), so the two backends differ only where the products' float32 rounding is tied, and in a fused
GELU (the compiled one is a rational function within 2.4e-7 max(1, |v|) of the exact one).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import epilogue, with_residual
from lite.kernels.activation import activation_fn
from lite.kernels.dynamic_quantize import QMAX
from lite.kernels.int8.conv2d import channel_values
from lite.kernels.int8.requantize import scales, zero_points
from lite.status import NotSupportedError

F32 = np.dtype(np.float32)


def quantize_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each row of x [M, K] as DynamicQuantizeLinear quantizes a tensor: (q uint8 [M, K], scale float32 [M],
    zero point int32 [M])."""
    high = np.maximum(x.max(axis=1, initial=0.0), 0.0).astype(F32)
    low = np.minimum(x.min(axis=1, initial=0.0), 0.0).astype(F32)
    scale = np.where(high != low, high - low, np.float32(1.0)).astype(F32) / np.float32(QMAX)
    zero = np.rint(np.clip(-low / scale, 0.0, QMAX))
    q = np.clip(np.rint(x / scale[:, None]) + zero[:, None], 0.0, QMAX)
    return q.astype(np.uint8), scale, zero.astype(np.int32)


@register("FullConnection", DataType.FLOAT32, quantized=True)
class DynamicFullConnectionKernel(Kernel):
    """inputs: x float32 [..., K], weight int8 [N, K] (per-channel along N, zero points 0), bias float32 [N]?,
    residual float32 [..., N]? (fuse_residual); output float32 [..., N]."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        if w.rank != 2 or x.rank < 1 or x.shape[-1] != w.shape[1]:
            raise self.error(f"input {list(x.shape)} does not match weight [out, in] {list(w.shape)}")
        n = w.shape[0]
        if w.value is None or w.dtype != np.int8 or x.dtype != F32:
            raise self.error("dynamic quantization needs a float32 input and a constant int8 weight",
                             NotSupportedError)
        if bias is not None and (bias.shape != (n,) or bias.dtype != F32):
            raise self.error(f"bias must be float32 [{n}], got {bias.dtype.name} {list(bias.shape)}")
        shape = x.shape[:-1] + (n,)
        if residual is not None and (tuple(residual.shape) != shape or residual.dtype != F32):
            raise self.error(f"residual input must be float32 {list(shape)} like the output")
        if np.any(zero_points(w.quant or [])) or np.any(np.abs(w.value.astype(np.int32)) > 127):
            raise self.error("the weight must be symmetric int8: values in [-127, 127], zero points 0",
                             NotSupportedError)
        self.weight_scale = channel_values(self, scales(w.quant or []), n, "the weight").astype(F32)
        self.weight = w.value
        self.rows = int(np.prod(x.shape[:-1], dtype=np.int64))
        self.activation = activation_fn(self.attrs.activation)
        return [TensorSpec(shape, F32)]

    def bind(self, inputs, outputs, scratch) -> None:
        x, out = inputs[0], outputs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None
        self.x2d = x.reshape(self.rows, -1)
        self.out2d = out.reshape(self.rows, -1)
        self.levels = self.weight.T.astype(np.float64)                 # [K, N]: exact products in float64
        self.macs = self.x2d.shape[1] * self.out2d.size
        if residual is None:
            self.finish = epilogue(self.out2d, bias, self.attrs.activation)
        else:
            self.finish = with_residual(epilogue(self.out2d, bias, 0), out, residual, self.activation)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        q, scale, zero = quantize_rows(self.x2d)
        acc = (q.astype(np.float64) - zero[:, None]) @ self.levels
        np.multiply(acc.astype(F32), scale[:, None] * self.weight_scale, out=self.out2d)
        if self.finish is not None:
            self.finish()
