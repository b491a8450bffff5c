"""STFT: short-time Fourier transform of signal [batch, length, 1 | 2] in frames of frame_length samples every
frame_step samples, each multiplied by `window` (ones when omitted); output [batch, frames, bins, 2] with
frames = 1 + (length - frame_length) // frame_step and bins = frame_length // 2 + 1 when `onesided`.
The frames are one strided view of the signal, transformed by a single FFT call.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.dft import as_complex, scalar_input, spectrum, write_pairs
from lite.status import InvalidOpAttrError


@register("STFT")
class STFTKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        signal = inputs[0]
        window = inputs[2] if len(inputs) > 2 else None
        if signal.rank != 3 or signal.shape[2] not in (1, 2) or signal.dtype.kind != "f":
            raise self.error(f"signal must be float [batch, length, 1 | 2], got {signal.dtype} "
                             f"{list(signal.shape)}")
        step = scalar_input(self, inputs[1], "frame_step")
        length = scalar_input(self, inputs[3] if len(inputs) > 3 else None, "frame_length")
        if window is not None:
            if window.rank != 1 or (length is not None and window.shape[0] != length):
                raise self.error(f"window must be [frame_length], got {list(window.shape)}")
            length = window.shape[0]
        length = signal.shape[1] if length is None else length
        if step < 1 or not 1 <= length <= signal.shape[1]:
            raise self.error(f"needs frame_step >= 1 and 1 <= frame_length <= signal length {signal.shape[1]}, "
                             f"got {step} and {length}", InvalidOpAttrError)
        self.step, self.length = step, length
        frames = 1 + (signal.shape[1] - length) // step
        bins = length // 2 + 1 if self.attrs.onesided else length
        return [TensorSpec((signal.shape[0], frames, bins, 2), signal.dtype)]

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        z = as_complex(inputs[0])                                           # [batch, length]
        frames = np.lib.stride_tricks.sliding_window_view(z, self.length, axis=1)[:, ::self.step]
        window = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        if window is not None:
            frames = frames * window
        write_pairs(outputs[0], spectrum(frames, self.length, 2, False, bool(self.attrs.onesided)))
