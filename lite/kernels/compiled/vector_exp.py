"""exp of a float32 written out so that loops calling it vectorise (libm's exp is a call LLVM cannot): Cephes'
expf, a power of two taken from a table times a degree-6 polynomial of the remainder (Cody-Waite reduction),
within 1 ulp of numpy's exp for y in [EXP_MIN, EXP_MAX]; callers clamp y into that range."""
from __future__ import annotations

import numpy as np

from lite.kernels.compiled.llvm import njit

F = np.float32
LOG2E, LN2_HI, LN2_LO = F(1.4426950408889634), F(0.693359375), F(-2.12194440e-4)
E0, E1, E2, E3, E4, E5 = (F(c) for c in (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
                                         1.6666665459e-1, 5.0000001201e-1))
LOWEST, HIGHEST = -126, 8
POWERS = np.array([2.0 ** k for k in range(LOWEST, HIGHEST + 1)], np.float32)    # 2^k, k in [-126, 8]
EXP_MIN, EXP_MAX = F(-87.0), F(5.0)


@njit(nogil=True, cache=True, inline="always")
def exp32(y):  # pragma: no cover
    """exp(y) in float32 for y in [EXP_MIN, EXP_MAX]."""
    k = np.rint(y * LOG2E)
    f = y - k * LN2_HI - k * LN2_LO
    return ((((((f * E0 + E1) * f + E2) * f + E3) * f + E4) * f + E5) * f * f + f + F(1.0)) * \
        POWERS[np.int32(k) - LOWEST]
