"""TFLite's fixed-point requantization (docs/quantization.md), vectorised over int64 numpy arrays.

A real multiplier `real > 0` is stored as `(M0, n)` with `real = M0 * 2^(n - 31)` and `M0` in `[2^30, 2^31)`;
`multiply_by_quantized_multiplier(x, M0, n)` is TFLite's `MultiplyByQuantizedMultiplier`: left shift by `max(n, 0)`,
`SaturatingRoundingDoublingHighMul`, then `RoundingDivideByPOT` by `max(-n, 0)`. Values are int64 arrays that hold
int32 quantities, so no product overflows; `M0` and `n` broadcast (per-channel multipliers along the last axis).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

Q31 = 1 << 31


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: (M0, n) with real = M0 * 2^(n - 31); (0, 0) for 0 and for reals too small
    to represent (n < -31)."""
    if real < 0:
        raise ValueError(f"multiplier {real} must not be negative")
    if real == 0:
        return 0, 0
    fraction, n = math.frexp(real)              # real = fraction * 2^n, fraction in [0.5, 1)
    m0 = int(math.floor(fraction * Q31 + 0.5))  # std::round: half away from zero (fraction > 0)
    if m0 == Q31:
        m0, n = m0 // 2, n + 1
    return (0, 0) if n < -31 else (m0, n)


def quantize_multipliers(reals: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_multiplier` of each real: int64 arrays (M0, n)."""
    pairs = [quantize_multiplier(float(r)) for r in np.ravel(reals)]
    return (np.array([p[0] for p in pairs], np.int64).reshape(np.shape(reals)),
            np.array([p[1] for p in pairs], np.int64).reshape(np.shape(reals)))


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """TFLite's SaturatingRoundingDoublingHighMul for int32 values (held in int64): the high half of 2*a*b,
    rounded. Its nudge (2^30, or 1 - 2^30 for negative products) followed by truncating division by 2^31
    equals floor((a*b + 2^30) / 2^31) in both signs; the one saturating case, a = b = -2^31, never occurs for
    multipliers from `quantize_multiplier` (b >= 0)."""
    product = np.multiply(a, b, dtype=np.int64)
    product += 1 << 30
    product >>= 31
    return product


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray | int) -> np.ndarray:
    """TFLite's RoundingDivideByPOT: x / 2^exponent rounded half away from zero (exponent >= 0)."""
    exponent = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x: np.ndarray, m0: np.ndarray | int, n: np.ndarray | int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier(x, M0, n) ~ x * M0 * 2^(n - 31), rounded as TFLite does."""
    n = np.asarray(n, np.int64)
    shifted = np.left_shift(np.asarray(x, np.int64), np.maximum(n, 0))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, m0), np.maximum(-n, 0))


def qrange(num_bits: int, narrow: bool = False) -> tuple[int, int]:
    """The signed range of `num_bits`-bit values: [-2^(b-1), 2^(b-1) - 1], its low end raised by one if narrow."""
    half = 1 << (num_bits - 1)
    return -half + int(narrow), half - 1


@dataclass(frozen=True)
class Requantizer:
    """acc -> clamp(MultiplyByQuantizedMultiplier(acc + bias, M0, n) + zp, lo, hi), everything fixed at compile
    time. `m0`/`n`/`bias` are scalars or per-channel arrays broadcasting along the last axis (`along` moves them).

    TFLite's two roundings (SRDHM, then RoundingDivideByPOT by e = max(-n, 0)) and the zero point fold into one
    floor division: with M = M0 * 2^max(n, 0) and S = 31 + e,
        MBQM(x) + zp = floor((x*M + 2^30 + [e > 0] (2^(S-1) - [x < 0] 2^31) + zp 2^S) / 2^S)
    (SRDHM is floor((x*M + 2^30) / 2^31); RDBP adds 2^(e-1), less 1 for a negative operand, and floors by 2^e;
    nested floors of integer offsets compose; the operand's sign is x's except where it is 0, where both offsets
    round to 0). A run is five int64 passes and a clamp into the output: t = x*M + offset (offset also holds
    bias*M), neg = t < neutral (that is, x + bias < 0), t >> 31, minus neg, >> e. `fused` is False when some
    channel could leave int64 (|acc| bound * M + offsets >= 2^63); then the reference functions above run.
    """
    m0: np.ndarray
    n: np.ndarray
    zero_point: int
    lo: int
    hi: int
    bias: np.ndarray
    m: np.ndarray           # M0 << max(n, 0)
    offset: np.ndarray      # bias*M + 2^30 + [e > 0] 2^(S-1) + zp 2^S
    neutral: np.ndarray     # offset - bias*M: t below it means acc < 0; INT64_MIN where e = 0 (no borrow)
    exponent: np.ndarray | int
    fused: bool

    @staticmethod
    def build(real: Sequence[float] | np.ndarray | float, zero_point: int, lo: int, hi: int,
              bias: np.ndarray | int = 0, acc_bound: np.ndarray | int = Q31) -> "Requantizer":
        """`acc_bound` bounds |acc + bias| (per channel or overall); int32 semantics by default."""
        m0, n = quantize_multipliers(np.asarray(real, np.float64))
        bias = np.asarray(bias, np.int64)
        shape = np.broadcast_shapes(m0.shape, bias.shape)
        e = np.maximum(-n, 0)
        m = m0 << np.maximum(n, 0)
        rounding = (1 << 30) + np.where(e > 0, np.int64(1) << np.minimum(30 + e, 62), 0)
        fused = True
        for mc, ec, bc, ac in zip(*(np.broadcast_to(v, shape).ravel().tolist() for v in (m, e, bias, acc_bound))):
            s = 31 + ec
            rounding_and_zp = (1 << 30) + (1 << (s - 1)) + abs(zero_point) * (1 << s) + (1 << 31)
            fused &= (abs(ac) + abs(bc)) * mc + rounding_and_zp < (1 << 63)     # every partial value of t
        if fused:
            neutral = rounding + (np.int64(zero_point) << (31 + e))
            offset = neutral + bias * m
            neutral = np.where(e > 0, neutral, np.iinfo(np.int64).min)
        else:
            offset = neutral = np.zeros(shape, np.int64)
        exponent = int(e.flat[0]) if e.size and (e == e.flat[0]).all() else e
        return Requantizer(m0, n, int(zero_point), int(lo), int(hi), bias, m, offset, neutral, exponent, fused)

    def along(self, layout: tuple[int, ...]) -> "Requantizer":
        """The same requantizer with its per-channel arrays reshaped to `layout` (e.g. channels first)."""
        def shaped(v):
            return v.reshape(layout) if isinstance(v, np.ndarray) and v.size > 1 else v
        return replace(self, **{f: shaped(getattr(self, f)) for f in
                                ("m0", "n", "bias", "m", "offset", "neutral", "exponent")})

    def __call__(self, acc: np.ndarray, out: np.ndarray, t: np.ndarray | None = None,
                 neg: np.ndarray | None = None) -> None:
        """Requantize `acc` (any integer or exact-integer float array) into `out`; `t` (int64) and `neg` (bool),
        shaped like acc, are optional work buffers (t may be acc itself when acc is int64)."""
        if not self.fused:
            y = multiply_by_quantized_multiplier(np.add(acc, self.bias, dtype=np.int64, casting="unsafe"),
                                                 self.m0, self.n)
            y += self.zero_point
            np.clip(y, self.lo, self.hi, out=out, casting="unsafe")
            return
        t = np.empty(acc.shape, np.int64) if t is None else t
        neg = np.empty(acc.shape, np.bool_) if neg is None else neg
        np.multiply(acc, self.m, out=t, dtype=np.int64, casting="unsafe")
        t += self.offset
        np.less(t, self.neutral, out=neg)
        t >>= 31
        t -= neg
        if not isinstance(self.exponent, int) or self.exponent:
            t >>= self.exponent
        np.clip(t, self.lo, self.hi, out=out, casting="unsafe")


# ---- reading quantization parameters ----------------------------------------------------------------------------
def scales(params: Sequence[Any]) -> np.ndarray:
    return np.array([p.scale for p in params], np.float64)


def zero_points(params: Sequence[Any]) -> np.ndarray:
    return np.array([p.zeroPoint for p in params], np.int64)


def tensor_range(params: Sequence[Any], dtype: np.dtype) -> tuple[int, int]:
    """Clamp bounds of a quantized tensor: its `num_bits` range (narrowed for weights), within its dtype."""
    info = np.iinfo(dtype)
    if not params or dtype.kind == "u":
        return int(info.min), int(info.max)
    lo, hi = qrange(min(params[0].numBits or 8, info.bits), False)
    return max(lo, int(info.min)), min(hi, int(info.max))


def same_params(a: Sequence[Any] | None, b: Sequence[Any] | None) -> bool:
    """Whether two tensors share scale and zero point (then a copy needs no requantization)."""
    a, b = a or [], b or []
    return len(a) == len(b) and all(x.scale == y.scale and x.zeroPoint == y.zeroPoint for x, y in zip(a, b))
