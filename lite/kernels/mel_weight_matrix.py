"""MelWeightMatrix: the [dft_length // 2 + 1, num_mel_bins] matrix of triangular mel filters (ONNX semantics:
num_mel_bins + 2 edges equally spaced on the mel scale between the edge frequencies, each mapped to the DFT bin
floor((dft_length + 1) * f / sample_rate)). Inputs are scalars known at compile time, so the op always folds.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.cast import numpy_dtype


def mel_weights(mel_bins: int, dft_length: int, sample_rate: float, low_hz: float, high_hz: float) -> np.ndarray:
    def mel(hz: float) -> float:
        return 2595 * np.log1p(hz / 700) / np.log(10)
    step = (mel(high_hz) - mel(low_hz)) / (mel_bins + 2)
    edges_hz = 700 * np.expm1((np.arange(mel_bins + 2) * step + mel(low_hz)) / 2595 * np.log(10))
    edges = ((dft_length + 1) * edges_hz // sample_rate).astype(np.int64)
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]
    j = np.arange(dft_length // 2 + 1)[:, None]
    rising = np.where((j >= left) & (j <= centre),
                      (j - left) / np.maximum(centre - left, 1), 0.0)
    rising = np.where(centre == left, (j == centre).astype(np.float64), rising)
    falling = np.where((j >= centre) & (j < right), (right - j) / np.maximum(right - centre, 1), 0.0)
    return np.where((j >= centre) & (j < right), falling, rising)


@register("MelWeightMatrix")
class MelWeightMatrixKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        names = ("num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz")
        values = []
        for spec, name in zip(inputs, names):
            value = self.known(spec, name)
            if value.size != 1:
                raise self.error(f"{name} must be a scalar, got shape {list(value.shape)}")
            values.append(value.item())
        bins, length, rate, low, high = values
        if int(bins) < 1 or int(length) < 1 or rate <= 0 or not 0 <= low <= high:
            raise self.error(f"needs num_mel_bins >= 1, dft_length >= 1, sample_rate > 0 and "
                             f"0 <= lower_edge_hertz <= upper_edge_hertz, got {values}")
        self.value = mel_weights(int(bins), int(length), rate, low, high).astype(
            numpy_dtype(self, self.attrs.data_type))
        return [TensorSpec(self.value.shape, self.value.dtype, self.value)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], self.value)
