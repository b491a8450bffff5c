"""TFLite's fixed-point requantization, single-rounding form (docs/quantization.md): the integer reference, and
`Requantizer`, which runs it as float64 arithmetic proven equal to it at compile time.

A real multiplier `real > 0` is stored as `(M0, n)` with `real = M0 * 2^(n - 31)` and `M0` in `[2^30, 2^31)`;
`multiply_by_quantized_multiplier(x, M0, n)` is TFLite's `MultiplyByQuantizedMultiplier` as built with
`TFLITE_SINGLE_ROUNDING`: (x * M0 * 2^max(n, 0) + 2^(S-1)) >> S with S = 31 + max(-n, 0), that is x * real
rounded half up, once.

MindSpore Lite's kernels (nnacl) round twice, as gemmlowp does (`NNACL`): h = x * M0 * 2^max(n, 0) / 2^31 rounded
half up (SaturatingRoundingDoublingHighMul), then h / 2^max(-n, 0) rounded half away from zero
(RoundingDivideByPOT). A model read from MindSpore Lite's own format carries that rule on its nodes
(`NodeDef.rounding`); everything else runs TFLite's (`TFLITE`).

onnxruntime's QLinearConv / QGemm (MLAS's requantization, `ONNXRUNTIME`) round once in float32 instead: the int32
sum plus the int32 bias converted to float32, times the float32 multiplier float32(s_x) * float32(s_w) /
float32(s_y) (formed in float32, in that order), clamped, rounded half to even, plus the zero point. Its float32
product rounds near ties where the fixed-point rules do not, so no (M0, n) reproduces it; `Requantizer` runs it
as it is (`float32_form`). The ONNX importer gives it to the int8 layers of a QDQ model, and to a conv that
onnxruntime leaves unfused `ONNXRUNTIME_FLOAT32`: no requantization, its float32 sum and QuantizeLinear
(`mlas_order`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Sequence

import numpy as np

from lite.kernel import TensorSpec

Q31 = 1 << 31
EXACT_F64 = 1 << 53     # float64 holds every integer up to here exactly
CHUNK = 1 << 16         # elements requantized per step: the float64 work buffer stays in L2
TILE = 1 << 13          # least elements per row of a chunk: numpy's ufunc buffer size (`Requantizer.bind`)
F64, I16 = np.dtype(np.float64), np.dtype(np.int16)
TFLITE, NNACL, ONNXRUNTIME = "tflite", "nnacl", "onnxruntime"     # the requantization rules (module docstring)
ONNXRUNTIME_FLOAT32 = "onnxruntime_float32"     # no requantization: onnxruntime's unfused float32 conv (`mlas_order`)


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


def real_multiplier(s_x: float, s_w: np.ndarray | float, s_y: float, rounding: str = TFLITE) -> np.ndarray:
    """s_x * s_w / s_y, the multiplier of a product's accumulator, in float64; `NNACL` as MindSpore Lite's
    kernels form it from float32 scales: the float32 product s_x * s_w, divided in float64; `ONNXRUNTIME` all in
    float32, as its QLinearConv forms it."""
    if rounding == ONNXRUNTIME:
        return (np.float32(s_x) * np.asarray(s_w, np.float32) / np.float32(s_y)).astype(F64)
    if rounding == NNACL:
        product = np.float32(s_x) * np.asarray(s_w, np.float32)
        return product.astype(F64) / F64.type(np.float32(s_y))
    return s_x * np.asarray(s_w, F64) / s_y


def quantize_multipliers(reals: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`quantize_multiplier` of each real, in numpy (the same float64 operations): int64 arrays (M0, n)."""
    reals = np.asarray(reals, F64)
    if not (np.isfinite(reals) & (reals >= 0)).all():
        raise ValueError(f"multipliers {reals[~(np.isfinite(reals) & (reals >= 0))]} must be finite and >= 0")
    fraction, n = np.frexp(reals)
    m0 = np.floor(fraction * Q31 + 0.5).astype(np.int64)
    carry = m0 == Q31
    m0, n = np.where(carry, m0 // 2, m0), n.astype(np.int64) + carry
    small = n < -31
    return np.where(small, 0, m0), np.where(small, 0, n)


def multiply_by_quantized_multiplier(x: np.ndarray, m0: np.ndarray | int, n: np.ndarray | int,
                                     rounding: str = TFLITE) -> np.ndarray:
    """(x * M0 * 2^max(n, 0) + 2^(S-1)) >> S, S = 31 + max(-n, 0): x * real rounded half up. x is an int64 array
    holding int32 quantities (nothing overflows) or an object array of Python ints (exact at any size); M0 and n
    broadcast (per-channel multipliers along the last axis). `NNACL` rounds twice (module docstring)."""
    x = np.asarray(x)
    n = np.asarray(n, np.int64)
    x = x if x.dtype == object else x.astype(np.int64)
    if rounding == NNACL:
        r = np.maximum(-n, 0)
        h = (x * (m0 << np.maximum(n, 0)) + (1 << 30)) >> 31
        return (h + ((1 << r) >> 1) - ((h < 0) & (r > 0)).astype(np.int64)) >> r
    s = 31 + np.maximum(-n, 0)
    return (x * (m0 << np.maximum(n, 0)) + (1 << (s - 1))) >> s


def qrange(num_bits: int, narrow: bool = False) -> tuple[int, int]:
    """The signed range of `num_bits`-bit values: [-2^(b-1), 2^(b-1) - 1], its low end raised by one if narrow."""
    half = 1 << (num_bits - 1)
    return -half + int(narrow), half - 1


# ---- the float64 form -------------------------------------------------------------------------------------------
def float_form(acc: np.ndarray, scale: Any, offset: Any, lo: int, hi: int, wide: bool, out: np.ndarray,
               t: np.ndarray, q: np.ndarray, below: Branch | None = None) -> None:
    """out = clip(trunc(acc * scale + offset), 0, hi - lo) + lo; `t` (float64) and `q` (int16) are work buffers
    shaped like acc. Unless `wide`, every truncated value is known to fit int16, so the cast comes first. With
    `below` (NNACL's second rounding), t below its threshold is first lowered by its step."""
    top = I16.type(hi - lo)         # a numpy scalar: np.clip checks Python int bounds against np.iinfo each call
    np.copyto(t, acc)               # then same-type multiply: 10 % faster than one mixed float32 x float64 pass
    t *= scale
    t += offset
    if below is not None:
        mask = below.mask[:t.size].reshape(t.shape) if below.mask is not None else np.empty(t.shape, bool)
        np.less(t, below.threshold, out=mask)
        np.subtract(t, below.step, out=t, where=mask)
    if wide:
        np.clip(t, 0, top, out=t)
    np.copyto(q, t, casting="unsafe")
    np.clip(q, I16.type(0), top, out=q)
    np.add(q, lo, out=out, casting="unsafe")


def float32_form(acc: np.ndarray, multiplier: Any, bias: Any, lo: int, hi: int, zero_point: int, out: np.ndarray,
                 t: np.ndarray, q: np.ndarray, below: None = None) -> None:
    """`ONNXRUNTIME`: out = clip(rint(float32(acc + bias) * multiplier) + zp, lo, hi), the product and the
    rounding (half to even) in float32; `t` (float64, contiguous) holds acc + bias exactly, then its first half
    the float32 steps. `q` and `below` are unused (the arguments of `float_form`)."""
    np.add(acc, bias, out=t)
    t32 = t.reshape(-1).view(np.float32)[:t.size].reshape(t.shape)
    np.multiply(t, np.asarray(multiplier, np.float32), out=t32, dtype=np.float32, casting="same_kind")
    np.rint(t32, out=t32)
    np.clip(t32, np.float32(lo - zero_point), np.float32(hi - zero_point), out=t32)
    np.add(t32, np.float32(zero_point), out=t32)
    np.copyto(out, t32, casting="unsafe")


@dataclass
class Branch:
    """NNACL's float form below zero: its second rounding takes ties away from zero, so where the first
    rounding's h is negative (t < `threshold`) t is lowered by `step` = 2^-r per channel (`Requantizer`)."""
    threshold: float
    step: Any
    mask: np.ndarray | None = None      # a bool work buffer of a bound run (`Requantizer.bind`)


def steps(m0: int, n: int, zero_point: int, lo: int, hi: int, a_lo: int, a_hi: int) -> tuple[range, list[int]]:
    """The outputs y in (y(a_lo), y(a_hi)] of y(a) = clamp(MBQM(a) + zp, lo, hi), with the least a reaching each:
    MBQM(a) >= j exactly when a * M >= j 2^S - 2^(S-1)."""
    s, m = 31 + max(-n, 0), m0 << max(n, 0)
    ref = multiply_by_quantized_multiplier(np.array([a_lo, a_hi], object), m0, n) + zero_point
    levels = range(max(int(ref[0]), lo) + 1, min(int(ref[1]), hi) + 1)
    return levels, [-(-((y - zero_point) * 2 ** s - 2 ** (s - 1)) // m) for y in levels]


def channel_form(m0: int, n: int, bias: int, bound: int, zero_point: int, lo: int, hi: int,
                 rounding: str = TFLITE) -> tuple[float, float, bool]:
    """One channel's (scale, offset) of `float_form` (`Requantizer`) and whether it equals the reference for
    every |acc| <= bound, in Python ints: the reference of `channel_forms`, which runs it where int64 overflows.

    Sufficient: acc * scale and the offset are exact, and so is t on its grid wherever the clamp does not decide
    (0 <= t < hi - lo + 1; values beyond round monotonically to values beyond). Otherwise it is checked where
    the reference steps: both sides are non-decreasing in acc, so agreeing at the least acc of each output, just
    below it and at both ends of the range means agreeing everywhere in it. `NNACL` offsets t by 2^-(r+1) more
    (`Requantizer`) and is only taken where sufficient."""
    m = m0 << max(n, 0)
    s = 31 + max(-n, 0)
    nnacl = 2 ** 30 if rounding == NNACL and n < 0 else 0          # 2^-(r+1), in units of 2^-S
    scale, offset = m / 2 ** s, (bias * m + 2 ** (s - 1) + nnacl + (zero_point - lo) * 2 ** s) / 2 ** s
    low_bit = m & -m
    grid = 2.0 ** (min(low_bit.bit_length() - 1 if m else s, s - 1) - s)    # t 2^S sums multiples of M, 2^(S-1)
    if (bound * (m // low_bit if m else 0) < EXACT_F64 and abs(offset) / grid < EXACT_F64
            and (hi - lo + 1) / grid <= EXACT_F64):
        return scale, offset, True
    if rounding == NNACL:
        return scale, offset, False
    levels, least = steps(m0, n, zero_point, lo, hi, bias - bound, bias + bound)
    a = np.array([bias - bound, bias + bound] + [x for r in least for x in (r - 1, r)], object)
    want = np.clip(multiply_by_quantized_multiplier(a, m0, n) + zero_point, lo, hi).astype(np.int64)
    got = np.empty(len(a), np.int64)
    float_form((a - bias).astype(F64), scale, offset, lo, hi, True, got, np.empty(len(a)), np.empty(len(a), I16))
    level = np.array(levels, np.int64)
    return scale, offset, bool(np.array_equal(got, want) and (want[2::2] < level).all()
                               and (want[3::2] >= level).all())


NATIVE_N = 19          # n <= 19: offset's high part plus 1/2-steps spans <= 53 bits (`channel_forms`)
NATIVE_A = 1 << 32     # |acc + bias| < 2^32: (acc + bias) * M0 fits int64


def mbqm64(a: np.ndarray, m0: np.ndarray, n: np.ndarray, rounding: str = TFLITE) -> np.ndarray:
    """MBQM for int64 a with |a M0| < 2^63 and n <= 30: (a M0 2^max(n,0) + 2^(S-1)) >> S equals
    ((a M0 >> (30 - n)) + 1) >> 1, which never forms the 2^(S-1) that may not fit int64. `NNACL` rounds the
    same way by 2^(31 - max(n, 0)), then divides by 2^r, r = max(-n, 0), rounding half away from zero."""
    if rounding == TFLITE:
        return (((a * m0) >> (30 - n)) + 1) >> 1
    r = np.maximum(-n, 0)
    h = (((a * m0) >> (30 - np.maximum(n, 0))) + 1) >> 1
    return (h + ((1 << r) >> 1) - ((h < 0) & (r > 0))) >> r


def channel_forms(m0: np.ndarray, n: np.ndarray, bias: np.ndarray, bound: np.ndarray, zero_point: int, lo: int,
                  hi: int, rounding: str = TFLITE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`channel_form` of every channel (flat integer arrays; `bound` may be an object array of Python ints), in
    numpy with the same decisions and bit-identical (scale, offset).

    Exact where n <= NATIVE_N and |bias| + bound < NATIVE_A (other channels run `channel_form`, the Python-int
    reference): scale = M0 2^(n-31) is a float64; with P = bias M0 = Ph 2^32 + Pl, offset is
    (Ph 2^(n+1) + (zp - lo + 1/2)) + Pl 2^(n-31), whose first sum is exact (its terms are multiples of
    2^min(n+1, -1) below 2^max(n+33, 21)), so the one rounding is the second's, as Python's int division rounds
    once. The step check finds each least acc from a float64 estimate moved to MBQM(a) >= y - zp > MBQM(a - 1)
    with the int64 `mbqm64`, then compares `float_form` and the reference at all points at once."""
    clamped = np.minimum(bound, NATIVE_A).astype(np.int64)
    native = _native(n, bias, clamped, zero_point, lo, hi)
    m0n, nn, bn, dn = (np.where(native, v, 0) for v in (m0, n, bias, clamped))
    scale = np.ldexp(m0.astype(F64), n - 31)
    p = bn * m0n
    nnacl = np.where((nn < 0) & (rounding == NNACL), np.ldexp(1.0, nn - 1), 0.0)    # 2^-(r+1) (`Requantizer`)
    offset = (np.ldexp((p >> 32).astype(F64), nn + 1) + ((zero_point - lo + 0.5) + nnacl)) + np.ldexp(
        (p & 0xFFFFFFFF).astype(F64), nn - 31)
    s = 31 + np.maximum(-nn, 0)
    low = m0n & -m0n
    tz = np.frexp(low.astype(F64))[1] - 1 + np.maximum(nn, 0)                 # trailing zeros of M
    grid = np.ldexp(1.0, np.where(m0n > 0, np.minimum(tz, s - 1), s - 1) - s)
    odd = np.where(m0n > 0, m0n // np.maximum(low, 1), 0)
    exact = ((dn * odd < EXACT_F64) & (np.abs(offset) / grid < EXACT_F64)
             & ((hi - lo + 1) / grid <= EXACT_F64))
    slow = np.flatnonzero(native & ~exact)
    if len(slow):
        exact[slow] = _steps_agree(m0n[slow], nn[slow], bn[slow], dn[slow], scale[slow], offset[slow],
                                   zero_point, lo, hi, rounding)
    for c in np.flatnonzero(~native):
        scale[c], offset[c], exact[c] = channel_form(int(m0[c]), int(n[c]), int(bias[c]), int(bound[c]),
                                                     zero_point, lo, hi, rounding)
    return scale, offset, exact


def _native(n: np.ndarray, bias: np.ndarray, bound: np.ndarray, zero_point: int, lo: int, hi: int) -> np.ndarray:
    """The channels `channel_forms` computes in int64/float64 (the others would overflow int64 or round)."""
    small = (n <= NATIVE_N) & (bias > -NATIVE_A) & (bias < NATIVE_A) & (bound >= 0) & (bound < NATIVE_A)
    return small & (np.abs(np.where(small, bias, 0)) + np.where(small, bound, 0) < NATIVE_A) & (
        abs(zero_point - lo) < 1 << 19)


def _steps_agree(m0: np.ndarray, n: np.ndarray, bias: np.ndarray, bound: np.ndarray, scale: np.ndarray,
                 offset: np.ndarray, zero_point: int, lo: int, hi: int, rounding: str = TFLITE,
                 points: int = 1 << 18) -> np.ndarray:
    """`channel_form`'s step check for native channels: both ends and, per output y they step through, the least
    acc reaching it and the one below, a group of about `points` steps at a time."""
    a_lo, a_hi = bias - bound, bias + bound
    start = np.maximum(mbqm64(a_lo, m0, n, rounding) + zero_point, lo) + 1
    count = np.maximum(np.minimum(mbqm64(a_hi, m0, n, rounding) + zero_point, hi) + 1 - start, 0)
    agree = np.empty(len(m0), bool)
    group = (np.cumsum(count) - count) // points
    for g in np.unique(group):
        sel = np.flatnonzero(group == g)
        ch = np.repeat(sel, count[sel])
        first = np.cumsum(count[sel]) - count[sel]
        k = start[ch] + np.arange(len(ch)) - np.repeat(first, count[sel]) - zero_point     # MBQM(least) >= k
        cm, cn = m0[ch], n[ch]
        a = np.clip(np.ceil((k - 0.5) / scale[ch]), a_lo[ch] + 1, a_hi[ch]).astype(np.int64)  # within 1
        while (down := mbqm64(a - 1, cm, cn, rounding) >= k).any():
            a -= down
        while (up := mbqm64(a, cm, cn, rounding) < k).any():
            a += up
        at = np.concatenate([a_lo[sel], a_hi[sel], a - 1, a])
        owner = np.concatenate([sel, sel, ch, ch])
        want = np.clip(mbqm64(at, m0[owner], n[owner], rounding) + zero_point, lo, hi)
        got = np.empty(len(at), np.int64)
        float_form((at - bias[owner]).astype(F64), scale[owner], offset[owner], lo, hi, True, got,
                   np.empty(len(at)), np.empty(len(at), I16), branch(rounding, n[owner], zero_point, lo))
        agree[sel] = np.bincount(owner[got != want], minlength=len(m0))[sel] == 0
    return agree


def branch(rounding: str, n: np.ndarray, zero_point: int, lo: int) -> Branch | None:
    """`float_form`'s NNACL branch for exponents n (none for TFLITE, nor where every negative h clamps to lo)."""
    if rounding != NNACL or lo >= zero_point:
        return None
    return Branch(zero_point - lo + 0.5, np.where(n < 0, np.ldexp(1.0, np.minimum(n, 0)), 0.0))


@dataclass(frozen=True)
class Requantizer:
    """acc -> clamp(MultiplyByQuantizedMultiplier(acc + bias, M0, n) + zp, lo, hi) for integer-valued acc (any
    integer or float dtype) with |acc| <= acc_bound, everything fixed at compile time. `m0`/`n`/`bias` and the
    float parameters are scalars or per-channel arrays broadcasting along the last axis (`along` moves them).

    A run is float64 arithmetic (`float_form`): with r = (acc + bias) * real exactly, MBQM = floor(r + 1/2), so
        y - lo = clip(trunc(t), 0, hi - lo),   t = acc * real + (bias * real + 1/2 + zp - lo)
    (trunc is floor where t >= 0, and below 0 both clamp to 0). `scale` = real and `offset` per channel;
    `channel_forms` checks at compile time that float64 computes them exactly where it matters. When it cannot
    (`exact` False), the int64 reference runs instead.

    `NNACL`'s two roundings are the same floor with 2^-(r+1) more in the offset where the first rounding's h is
    >= 0, and 2^-(r+1) less where it is negative (t below zp - lo + 1/2): `below`, a branch taken only where
    the clamp does not hide it (lo < zp).

    `ONNXRUNTIME` keeps `real` (the float32 multiplier) as `scale` and the bias as `offset`, and runs
    `float32_form`: exact in float64 up to the float32 steps, which are its rule.
    """
    m0: np.ndarray
    n: np.ndarray
    zero_point: int
    lo: int
    hi: int
    bias: np.ndarray
    scale: np.ndarray
    offset: np.ndarray
    exact: bool
    wide: bool              # some trunc(t) may pass int16: clamp in float64 first
    rounding: str = TFLITE
    below: Branch | None = None
    tiles: dict[int, list[np.ndarray]] = field(default_factory=dict, compare=False, repr=False)  # `bind`'s rows

    @staticmethod
    def build(real: Sequence[float] | np.ndarray | float, zero_point: int, lo: int, hi: int,
              bias: np.ndarray | int = 0, acc_bound: np.ndarray | int = Q31, rounding: str = TFLITE
              ) -> "Requantizer":
        """`acc_bound` bounds |acc| (per channel or overall), the bias excluded; int32 semantics by default."""
        if not lo <= hi < lo + (1 << 15):
            raise ValueError(f"clamp range [{lo}, {hi}] is empty or wider than 15 bits")
        m0, n = quantize_multipliers(np.asarray(real, np.float64))
        bias = np.asarray(bias, np.int64)
        shape = np.broadcast_shapes(m0.shape, bias.shape)
        if rounding == ONNXRUNTIME:
            multiplier, offset = (np.broadcast_to(np.asarray(v, F64), shape).copy() for v in (real, bias))
            return Requantizer(m0, n, int(zero_point), int(lo), int(hi), bias, multiplier, offset, True, False,
                               rounding)
        flat = [np.broadcast_to(v, shape).ravel() for v in (m0, n, bias, np.asarray(acc_bound))]
        scale, offset, exact = channel_forms(*flat, zero_point, lo, hi, rounding)
        scale, offset, exact = scale.reshape(shape), offset.reshape(shape), bool(exact.all())
        reach = np.asarray(acc_bound, F64) * scale + np.abs(offset) + 1         # >= |trunc(t)|, rounded
        below = branch(rounding, np.broadcast_to(n, shape), zero_point, lo)
        return Requantizer(m0, n, int(zero_point), int(lo), int(hi), bias, scale, offset, exact,
                           bool(reach.max() >= 1 << 15), rounding, below)

    @property
    def affine(self) -> bool:
        """Whether a run is one exact affine floor, clip(trunc(acc * scale + offset)) (`per_channel`), which the
        compiled kernels fuse."""
        return self.exact and self.below is None and self.rounding != ONNXRUNTIME

    def lowering(self, channels: int) -> tuple[np.ndarray, np.float64]:
        """`below` as the compiled epilogues take it: (step as float64 [channels], threshold); zero steps under a
        threshold of -inf where there is no branch."""
        if self.below is None:
            return np.zeros(channels), np.float64(-np.inf)
        step = np.ascontiguousarray(np.broadcast_to(self.below.step, (channels,)), F64)
        return step, np.float64(self.below.threshold)

    def per_channel(self, channels: int) -> tuple[np.ndarray, np.ndarray, int, float]:
        """The float form as the compiled kernels take it: (scale, offset) as float64 [channels], lo, hi - lo."""
        scale, offset = (np.ascontiguousarray(np.broadcast_to(v, (channels,)), F64) for v in (self.scale, self.offset))
        return scale, offset, self.lo, float(self.hi - self.lo)

    def along(self, layout: tuple[int, ...]) -> "Requantizer":
        """The same requantizer with its per-channel arrays reshaped to `layout` (e.g. channels first)."""
        def shaped(v):
            return v.reshape(layout) if isinstance(v, np.ndarray) and v.size > 1 else v
        below = self.below and replace(self.below, step=shaped(self.below.step))
        return replace(self, tiles={}, below=below, **{f: shaped(getattr(self, f))
                                                       for f in ("m0", "n", "bias", "scale", "offset")})

    def __call__(self, acc: np.ndarray, out: np.ndarray) -> None:
        """Requantize `acc` into `out` in one step (work buffers allocated: for compile time and small tensors)."""
        if not self.exact:
            y = multiply_by_quantized_multiplier(np.add(acc, self.bias, dtype=np.int64, casting="unsafe"),
                                                 self.m0, self.n, self.rounding)
            np.clip(y + self.zero_point, self.lo, self.hi, out=out, casting="unsafe")
            return
        self.form(acc, self.scale, self.offset, self.lo, self.hi, self.form_arg, out, np.empty(acc.shape),
                  np.empty(acc.shape, I16), self.below)

    @property
    def form(self) -> Callable[..., None]:
        """The run of an exact requantizer: `float_form`, or `float32_form` for `ONNXRUNTIME`."""
        return float32_form if self.rounding == ONNXRUNTIME else float_form

    @property
    def form_arg(self) -> bool | int:
        """The sixth argument of `form`: `wide` for `float_form`, the zero point for `float32_form`."""
        return self.zero_point if self.rounding == ONNXRUNTIME else self.wide

    @staticmethod
    def work(shape: tuple[int, ...]) -> TensorSpec:
        """The work buffer of `bind` for an accumulator of `shape`: bytes for a float64 t and an int16 q of one
        chunk."""
        shape = tuple(shape) or (1,)
        size = min(int(np.prod(shape, dtype=np.int64)), max(CHUNK, int(np.prod(shape[1:], dtype=np.int64))))
        return TensorSpec((size * (F64.itemsize + I16.itemsize),), np.dtype(np.uint8))

    def bind(self, acc: np.ndarray, out: np.ndarray, work: np.ndarray) -> Callable[[], None]:
        """A prebound run of acc into out (same shape) a chunk at a time through the `work` buffer.

        numpy runs a ufunc against an operand broadcast along rows shorter than its buffer size (TILE elements)
        about half as fast as along longer rows (measured: a float64 add of per-channel values costs 0.39 vs
        0.19 ns per element); so contiguous accumulators with per-channel parameters on the last axis run as
        rows of at least TILE elements against parameters repeated to that length (made once per requantizer,
        ~128 KiB). Other layouts are cut along axis 0."""
        acc, out = np.atleast_1d(acc), np.atleast_1d(out)
        if not self.exact:
            return lambda: self(acc, out)
        params = [self.scale, self.offset] + ([self.below.step] if self.below else [])
        if all(np.ndim(p) <= 1 for p in params) and acc.flags.c_contiguous and out.flags.c_contiguous:
            period = acc.shape[-1] if any(np.ndim(p) for p in params) else 1
            if period not in self.tiles:
                self.tiles[period] = [np.tile(p, -(-TILE // period)) if np.ndim(p) else p for p in params]
            params = self.tiles[period]
            acc, out = acc.reshape(-1), out.reshape(-1)
            row = period * -(-TILE // period)
            step = max(1, CHUNK // row) * row
            full = len(acc) // row * row
            parts = [(np.s_[i:min(i + step, full)], (-1, row), params) for i in range(0, full, step)]
            if full < len(acc):
                parts.append((np.s_[full:], (-1,), [p[:len(acc) - full] if np.ndim(p) else p for p in params]))
        else:
            rows = max(1, CHUNK // max(1, int(np.prod(acc.shape[1:], dtype=np.int64))))
            parts = [(np.s_[i:i + rows], acc[i:i + rows].shape,
                      [p[i:i + rows] if np.ndim(p) == acc.ndim and np.shape(p)[0] > 1 else p for p in params])
                     for i in range(0, len(acc), rows)]
        size = len(work) // (F64.itemsize + I16.itemsize)
        t, q = work[:size * F64.itemsize].view(F64), work[size * F64.itemsize:].view(I16)
        mask = np.empty(size, bool) if self.below else None
        chunks = []
        for part, shape, (scale, offset, *step) in parts:
            a, o = acc[part].reshape(shape), out[part].reshape(shape)
            below = self.below and replace(self.below, step=step[0], mask=mask)
            chunks.append((a, scale, offset, self.lo, self.hi, self.form_arg, o, t[:a.size].reshape(a.shape),
                           q[:a.size].reshape(a.shape), below))
        return Chunks(chunks, self.form)


@dataclass
class Chunks:
    """`Requantizer.bind`: the `form` arguments of every chunk, made once so a run only computes."""
    args: list[tuple[Any, ...]]
    form: Callable[..., None] = float_form

    def __call__(self) -> None:
        for args in self.args:
            self.form(*args)


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
