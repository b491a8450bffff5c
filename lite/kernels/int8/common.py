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


def exact_ranges(weight: np.ndarray, max_x: int) -> list[tuple[int, int]]:
    """Split K of a constant [K, O] integer weight into ranges whose float32 partial sums are exact for any
    |x| <= max_x: within a range, max_x * sum_k |w[k, o]| <= 2^24 for every column o (a per-column L1 bound,
    far looser than K * max|x| * max|w| for real weights, which rarely need more than one range)."""
    limit = EXACT_F32 // max(max_x, 1)
    running = np.cumsum(np.abs(weight.astype(np.int64)), axis=0)      # [K, O]
    ranges, start = [], 0
    while start < len(weight):
        base = running[start - 1] if start else 0
        over = np.flatnonzero((running[start:] - base).max(axis=1) > limit)
        stop = start + max(int(over[0]) if over.size else len(weight) - start, 1)
        ranges.append((start, stop))
        start = stop
    return ranges


def int32_gemm_fits(centred: np.ndarray, max_x: int) -> bool:
    """Whether `compiled.int8.gemm_requantize` is exact for centred [O, K] weights and inputs |x| <= max_x: every
    channel's sum stays within int32 and every weight fits the int16 pairs."""
    magnitude = np.abs(centred.astype(np.int64))
    return (int(max_x * magnitude.sum(axis=1).max(initial=0)) < 1 << 31
            and int(magnitude.max(initial=0)) < 1 << 15)


def even_ranges(depth: int, chunk: int) -> list[tuple[int, int]]:
    return [(k, min(k + chunk, depth)) for k in range(0, depth, chunk)]


@dataclass
class ExactGemm:
    """lhs @ rhs exactly, for float32 lhs/rhs holding integers: K is split into ranges whose partial sums are
    exact in float32 (`exact_ranges`); several ranges are summed in float64 (exact below 2^53).

    lhs [..., M, K], rhs [..., K, N]; `result` is `product` (float32) for one range, else `total` (float64)."""
    chunks: list[tuple[np.ndarray, np.ndarray]]
    product: np.ndarray
    total: np.ndarray | None

    @staticmethod
    def build(lhs: np.ndarray, rhs: np.ndarray, ranges: list[tuple[int, int]], product: np.ndarray,
              total: np.ndarray | None) -> "ExactGemm":
        chunks = [(lhs[..., a:b], rhs[..., a:b, :]) for a, b in ranges]
        return ExactGemm(chunks, product, total if len(chunks) > 1 else None)

    @property
    def result(self) -> np.ndarray:
        return self.product if self.total is None else self.total

    def __call__(self) -> None:
        (lhs, rhs), *rest = self.chunks
        np.matmul(lhs, rhs, out=self.product)
        if rest:
            np.copyto(self.total, self.product)
        for lhs, rhs in rest:
            np.matmul(lhs, rhs, out=self.product)
            self.total += self.product
