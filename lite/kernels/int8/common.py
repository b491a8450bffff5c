"""What the int8 kernels share: reading a tensor's quantization, fused-activation clamps, and the exact
integer GEMM run as float32 BLAS products (docs/quantization.md, "Arithmetic")."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec
from lite.kernels.int8.requantize import tensor_range
from lite.status import NotSupportedError
from schema import fb

EXACT_F32 = 1 << 24     # float32 holds every integer up to here exactly
A = fb.ActivationType


@dataclass(frozen=True)
class Quant:
    """Per-tensor quantization of an activation tensor: scale, zero point and clamp range."""
    scale: float
    zero_point: int
    lo: int
    hi: int

    def quantize(self, real: float) -> int:
        return int(np.clip(np.rint(real / self.scale) + self.zero_point, self.lo, self.hi))


def quant_of(kernel: Kernel, params: Sequence[Any] | None, dtype: np.dtype, what: str) -> Quant:
    """The single QuantParam of an activation tensor; missing or per-channel params are the kernel's error."""
    if not params or len(params) != 1:
        count = len(params) if params else 0
        raise kernel.error(f"{what} needs one (per-tensor) quantization parameter, it has {count}",
                           NotSupportedError)
    lo, hi = tensor_range(params, dtype)
    return Quant(float(params[0].scale), int(params[0].zeroPoint), lo, hi)


def input_quant(kernel: Kernel, spec: TensorSpec, what: str = "input") -> Quant:
    return quant_of(kernel, spec.quant, spec.dtype, what)


def output_quant(kernel: Kernel, dtype: np.dtype, index: int = 0) -> Quant:
    return quant_of(kernel, kernel.out_quant[index], dtype, f"output {index}")


def fused_bounds(kernel: Kernel, activation: int, q: Quant) -> tuple[int, int]:
    """A fused activation as clamp bounds in the quantized domain: RELU lo = quantize(0), RELU6 also
    hi = quantize(6); NO_ACTIVATION keeps the tensor's range."""
    if activation == A.NO_ACTIVATION:
        return q.lo, q.hi
    if activation == A.RELU:
        return q.quantize(0.0), q.hi
    if activation == A.RELU6:
        return q.quantize(0.0), q.quantize(6.0)
    raise kernel.error(f"fused activation {activation} has no int8 form (only RELU and RELU6)", NotSupportedError)


def chunk_depth(depth: int, bound: int) -> int:
    """The largest K slice whose every partial sum stays float32-exact when |product| <= `bound`."""
    return max(1, min(depth, EXACT_F32 // max(bound, 1)))


@dataclass
class ExactGemm:
    """acc = bias + lhs @ rhs in int64, with lhs/rhs float32 arrays of integers: K is split in chunks whose
    partial sums are exact in float32, and the chunks are summed in int64.

    lhs [..., M, K], rhs [..., K, O]; `acc` is an int64 view shaped like the product, `bias` broadcasts to it."""
    chunks: list[tuple[np.ndarray, np.ndarray]]
    product: np.ndarray
    acc: np.ndarray
    bias: np.ndarray

    @staticmethod
    def build(lhs: np.ndarray, rhs: np.ndarray, chunk: int, product: np.ndarray, acc: np.ndarray,
              bias: np.ndarray) -> "ExactGemm":
        depth = lhs.shape[-1]
        chunks = [(lhs[..., k:k + chunk], rhs[..., k:k + chunk, :]) for k in range(0, depth, chunk)]
        return ExactGemm(chunks, product, acc, bias)

    def __call__(self) -> None:
        (lhs, rhs), *rest = self.chunks
        np.matmul(lhs, rhs, out=self.product)
        np.add(self.product, self.bias, out=self.acc, casting="unsafe")
        for lhs, rhs in rest:
            np.matmul(lhs, rhs, out=self.product)
            np.add(self.acc, self.product, out=self.acc, casting="unsafe")
