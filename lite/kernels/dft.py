"""DFT: the discrete Fourier transform along one axis of a real ([..., 1]) or complex ([..., 2], real and
imaginary parts) signal; output [..., 2] (or real [..., 1] for the inverse of a one-sided spectrum).

`dft_length` (optional input) zero-pads or truncates the signal; `onesided` keeps the dft_length // 2 + 1
non-redundant bins (forward) or reads them as the half spectrum of a real signal (inverse, numpy's irfft; the
default length is then 2 * (bins - 1)). The axis comes from the `axis` input (opset 20) or attribute (opset 17).
Computed by numpy's FFT at the input's precision (float16 in float32).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def as_complex(x: np.ndarray) -> np.ndarray:
    """[..., 1] real or [..., 2] (re, im) -> complex [...] (at least complex64)."""
    z = x[..., 0].astype(np.result_type(x.dtype, np.complex64))
    if x.shape[-1] == 2:
        z.imag = x[..., 1]
    return z


def write_pairs(out: np.ndarray, z: np.ndarray) -> None:
    """out[..., 0] = real(z), out[..., 1] = imag(z) (only the real part when out is [..., 1])."""
    np.copyto(out[..., 0], z.real, casting="unsafe")
    if out.shape[-1] == 2:
        np.copyto(out[..., 1], z.imag, casting="unsafe")


def scalar_input(kernel: Kernel, spec: TensorSpec | None, what: str) -> int | None:
    """The integer value of an optional scalar parameter input (None when omitted)."""
    if spec is None:
        return None
    value = kernel.known(spec, what)
    if value.size != 1 or value.dtype.kind not in "iu":
        raise kernel.error(f"{what} must be an integer scalar, got {value.tolist()} ({value.dtype})")
    return int(value.item())


def spectrum(z: np.ndarray, length: int, axis: int, inverse: bool, onesided: bool) -> np.ndarray:
    if not inverse:
        z = np.fft.fft(z, n=length, axis=axis)
        return z[(slice(None),) * axis + (slice(0, length // 2 + 1),)] if onesided else z
    return np.fft.irfft(z, n=length, axis=axis) if onesided else np.fft.ifft(z, n=length, axis=axis)


@register("DFT")
class DFTKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if x.rank < 2 or x.shape[-1] not in (1, 2) or x.dtype.kind != "f":
            raise self.error(f"input must be float [..., 1] (real) or [..., 2] (complex), got {x.dtype} "
                             f"{list(x.shape)}")
        axis = scalar_input(self, inputs[2] if len(inputs) > 2 else None, "axis")
        axis = self.attrs.axis if axis is None else axis
        if not -x.rank <= axis < x.rank - 1 or axis % x.rank == x.rank - 1:
            raise self.error(f"axis {axis} must name a signal axis of the rank-{x.rank} input (not the last)",
                             InvalidOpAttrError)
        self.axis = axis % x.rank
        inverse, onesided = bool(self.attrs.inverse), bool(self.attrs.onesided)
        n = x.shape[self.axis]
        length = scalar_input(self, inputs[1] if len(inputs) > 1 else None, "dft_length")
        self.length = length if length is not None else (2 * (n - 1) if inverse and onesided else n)
        if self.length < 1:
            raise self.error(f"dft_length must be positive, got {self.length}", InvalidOpAttrError)
        bins = self.length // 2 + 1 if onesided and not inverse else self.length
        shape = list(x.shape)
        shape[self.axis], shape[-1] = bins, 1 if inverse and onesided else 2
        return [TensorSpec(tuple(shape), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        z = spectrum(as_complex(inputs[0]), self.length, self.axis, bool(self.attrs.inverse),
                     bool(self.attrs.onesided))
        write_pairs(outputs[0], z)
