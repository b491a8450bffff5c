"""DetGrad: d det(A) / dA is A's cofactor matrix, det(A) * A^-T where A is invertible.

From the SVD A = U diag(s) V^T the cofactors are det(U) det(V) * U diag(p) V^T with p_i the product of the other
singular values, so no inverse is formed and singular matrices (rank M-1 has nonzero cofactors) are exact too."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register


def cofactors(a: np.ndarray) -> np.ndarray:
    """The cofactor matrix of each [..., M, M] matrix of `a` (float64)."""
    u, s, vt = np.linalg.svd(a)
    ones = np.ones_like(s[..., :1])
    left = np.cumprod(np.concatenate([ones, s[..., :-1]], -1), -1)                    # prod of s_j, j < i
    right = np.cumprod(np.concatenate([ones, s[..., :0:-1]], -1), -1)[..., ::-1]      # prod of s_j, j > i
    sign = np.linalg.det(u) * np.linalg.det(vt)
    return sign[..., None, None] * (u * (left * right)[..., None, :]) @ vt


@register("DetGrad", DataType.FLOAT32)
class DetGradKernel(Kernel):
    """inputs: dy [...], x [..., M, M] -> dx [..., M, M]."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[:2]
        if x.rank < 2 or x.shape[-1] != x.shape[-2] or dy.shape != x.shape[:-2]:
            raise self.error(f"needs dy [...] and x [..., M, M], got {list(dy.shape)} and {list(x.shape)}")
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        dy, x = inputs[:2]
        if x.shape[-1] == 0:            # det of a 0x0 matrix is 1, a constant
            return
        np.multiply(dy[..., None, None], cofactors(x.astype(np.float64)), out=outputs[0], casting="unsafe")
