"""QuantParam construction and (de)quantization, per docs/quantization.md: real = scale * (q - zero_point)."""
from __future__ import annotations

import numpy as np

from schema import fb


def qrange(bits: int, narrow: bool = False) -> tuple[int, int]:
    """Signed b-bit integer range; narrow drops the most negative value (symmetric weights)."""
    return -(2 ** (bits - 1)) + int(narrow), 2 ** (bits - 1) - 1


def make_param(scale: float, zero_point: int, lo: float, hi: float, bits: int, narrow: bool) -> fb.QuantParamT:
    p = fb.QuantParamT()
    p.scale, p.zeroPoint, p.min, p.max = float(scale), int(zero_point), float(lo), float(hi)
    p.numBits, p.narrowRange, p.inited = bits, narrow, True
    return p


def activation_param(lo: float, hi: float, bits: int) -> fb.QuantParamT:
    """Asymmetric per-tensor params for the float range [lo, hi], widened to contain 0 (so zero padding and
    ReLU's floor are exact); the zero point is an integer inside the quantized range."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    qmin, qmax = qrange(bits)
    scale = (hi - lo) / (qmax - qmin) if hi > lo else 1.0
    zero_point = int(np.clip(np.rint(qmin - lo / scale), qmin, qmax))
    return make_param(scale, zero_point, lo, hi, bits, False)


def quantize(x: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray, lo: int, hi: int,
             dtype: np.dtype = np.dtype(np.int8)) -> np.ndarray:
    """`clamp(rint(x / scale) + zero_point)` (round half to even), as QuantDTypeCast does."""
    return np.clip(np.rint(np.asarray(x, np.float64) / scale) + zero_point, lo, hi).astype(dtype)


def dequantize(q: np.ndarray, scale: float | np.ndarray, zero_point: int | np.ndarray) -> np.ndarray:
    return ((q.astype(np.float64) - zero_point) * scale).astype(np.float32)


def quantize_tensor(x: np.ndarray, p: fb.QuantParamT) -> np.ndarray:
    """Quantize with one per-tensor param into int8."""
    return quantize(x, p.scale, p.zeroPoint, *qrange(p.numBits, p.narrowRange))


def dequantize_tensor(q: np.ndarray, p: fb.QuantParamT) -> np.ndarray:
    return dequantize(q, p.scale, p.zeroPoint)
