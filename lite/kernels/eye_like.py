"""EyeLike: a 2-D tensor of x's shape with ones on diagonal k and zeros elsewhere (ONNX EyeLike).

It depends only on x's shape, so it is always computed at compile time. `data_type` 0 keeps x's dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.cast import numpy_dtype


@register("EyeLike")
class EyeLikeKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank != 2:
            raise self.error(f"the input must be 2-D, got shape {list(x.shape)}")
        dtype = numpy_dtype(self, self.attrs.data_type) if self.attrs.data_type else x.dtype
        self.value = np.eye(x.shape[0], x.shape[1], int(self.attrs.k), dtype=dtype)
        return [TensorSpec(x.shape, dtype, self.value)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], self.value)
