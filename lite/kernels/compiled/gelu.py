"""Compiled GELU (x * Phi(x), the exact form; its tanh approximation is `gelu_tanh`) in one threaded, vectorised
pass, with the numpy kernel's float32 erfc (`unary.erf`'s branch for |x| >= 0.84375: t exp(-z^2 + C(t)), t = 1 / (1 + z / 2), relative error < 1.2e-7)
for every x: erf = sign(a) (1 - erfc(|a|)) is then within ~1.2e-7 of erf absolutely, which GELU needs (x (1 + erf)
/ 2 is within ~1.2e-7 of itself relatively) and the numpy kernel's second branch (erf's relative accuracy near 0)
does not add to. exp is written out (`vector_exp`), since libm's exp is a call the loop cannot vectorise. GELU
was 40 % of a BERT encoder's float run and a third of its dynamically quantized one."""
from __future__ import annotations

import math

import numpy as np

from lite.kernels.compiled import Compiled
from lite.kernels.compiled.llvm import njit, prange
from lite.kernels.compiled.vector_exp import exp32
from lite.kernels.unary import _ERFC_C, _ERFC_CLAMP

F = np.float32
C0, C1, C2, C3, C4, C5, C6, C7, C8, C9 = (F(c) for c in _ERFC_C)
CLAMP, ROOT_HALF, ONE, HALF = F(_ERFC_CLAMP), F(1.0 / math.sqrt(2.0)), F(1.0), F(0.5)
TWO_ROOT_2_PI, CUBIC, EXP_FLOOR = F(2.0 * math.sqrt(2.0 / math.pi)), F(0.044715), F(-87.0)


@njit(nogil=True, cache=True, inline="always")
def gelu32(v):  # pragma: no cover
    """v * (1 + erf(v / sqrt(2))) / 2 in float32 (also the epilogue of the dynamic GEMM, `dynamic_gemm`)."""
    a = v * ROOT_HALF
    z = min(abs(a), CLAMP)
    t = ONE / (z * HALF + ONE)
    r = ((((((((t * C0 + C1) * t + C2) * t + C3) * t + C4) * t + C5) * t + C6) * t + C7) * t + C8) * t + C9
    erf = np.copysign(ONE - exp32(r - z * z) * t, a)      # exp32's argument lies in [-17.3, 0.1]
    return v * ((erf + ONE) * HALF)


@Compiled
def gelu(x, out):  # pragma: no cover
    """out[i] = gelu32(x[i]) over flat float32 arrays (distinct: in place, the loop does not vectorise)."""
    for i in prange(len(x)):
        out[i] = gelu32(x[i])


@njit(nogil=True, cache=True, inline="always")
def gelu_tanh32(v):  # pragma: no cover
    """v (1 + tanh(u)) / 2 = v sigmoid(2u), u = sqrt(2 / pi) (v + 0.044715 v^3), in float32: with e = exp(-|2u|)
    (never overflowing; 0 below exp32's range), sigmoid(2u) is 1 / (1 + e) for u >= 0 and e / (1 + e) below."""
    z = v * (v * v * CUBIC + ONE) * TWO_ROOT_2_PI
    e = exp32(max(-abs(z), EXP_FLOOR)) if abs(z) < -EXP_FLOOR else F(0.0)
    return v * ((ONE if z >= 0 else e) / (ONE + e))


@Compiled
def gelu_tanh(x, out):  # pragma: no cover
    """out[i] = gelu_tanh32(x[i]) over flat float32 arrays (distinct, as `gelu`'s)."""
    for i in prange(len(x)):
        out[i] = gelu_tanh32(x[i])
