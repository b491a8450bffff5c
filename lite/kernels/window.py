"""Window: the generalised cosine windows of ONNX's HannWindow, HammingWindow and BlackmanWindow,
w[n] = a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, N = size (periodic) or size - 1 (symmetric).
Input: size (an integer scalar, known at compile time); output [size] of TypeId `data_type`, computed in
float64 and cast once.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.cast import numpy_dtype
from lite.status import InvalidOpAttrError
from schema import fb

COEFFICIENTS = {fb.WindowKind.HANN: (0.5, 0.5, 0.0), fb.WindowKind.HAMMING: (25 / 46, 21 / 46, 0.0),
                fb.WindowKind.BLACKMAN: (0.42, 0.5, 0.08)}


def cosine_window(size: int, coefficients: tuple[float, float, float], periodic: bool) -> np.ndarray:
    a0, a1, a2 = coefficients
    if size == 1:
        return np.ones(1)
    phase = 2 * np.pi * np.arange(size) / (size if periodic else size - 1)
    return a0 - a1 * np.cos(phase) + a2 * np.cos(2 * phase)


@register("Window")
class WindowKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        size = self.known(inputs[0], "size")
        if size.size != 1 or size.dtype.kind not in "iu" or int(size.item()) < 0:
            raise self.error(f"size must be a non-negative integer scalar, got {size.tolist()} ({size.dtype})")
        if self.attrs.kind not in COEFFICIENTS:
            raise self.error(f"window kind {self.attrs.kind} is unknown", InvalidOpAttrError)
        window = cosine_window(int(size.item()), COEFFICIENTS[self.attrs.kind], bool(self.attrs.periodic))
        self.value = window.astype(numpy_dtype(self, self.attrs.data_type))
        return [TensorSpec(self.value.shape, self.value.dtype, self.value)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], self.value)
