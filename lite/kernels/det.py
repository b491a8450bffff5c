"""Det: the determinant of each square matrix in x [..., M, M] (ONNX Det), by LU factorisation (LAPACK);
float16 is computed in float32."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.unary import FLOAT_TYPES


@register("Det", *FLOAT_TYPES)
class DetKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank < 2 or x.shape[-1] != x.shape[-2]:
            raise self.error(f"input shape {list(x.shape)} is not [..., M, M]")
        self.compute_dtype = np.float32 if x.dtype == np.float16 else x.dtype
        return [TensorSpec(x.shape[:-2], x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], np.linalg.det(inputs[0].astype(self.compute_dtype, copy=False)), casting="unsafe")
