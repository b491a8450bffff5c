"""Unary elementwise ops: Sqrt, Exp, Log, Erf on float tensors; Neg and Abs on any numeric tensor.

Also `erf`, the vectorised float32 error function GELU shares: |erf(x) - math.erf(x)| <= 1.3e-7 on float32.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare

FLOAT_TYPES = (DataType.FLOAT16, DataType.FLOAT32, DataType.FLOAT64)

# |x| < 0.84375: erf(x) = x + x * P(x^2) / Q(x^2), the fdlibm (s_erff.c) minimax pair, < 1 ulp in float32.
_ERF_SPLIT = 0.84375
_ERF_P = (-2.3763017452e-05, -5.7702702470e-03, -2.8481749818e-02, -3.2504209876e-01, 1.2837916613e-01)
_ERF_Q = (-3.9602282413e-06, 1.3249473704e-04, 5.0813062117e-03, 6.5022252500e-02, 3.9791721106e-01, 1.0)
# |x| >= 0.84375: erfc(z) = t * exp(-z^2 + C(t)), t = 1 / (1 + z / 2), Numerical Recipes' Chebyshev fit
# (relative error < 1.2e-7). Beyond z = 4 erf is 1 in float32, so z is clamped there (no denormals).
_ERFC_C = (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196,
           1.00002368, -1.26551223)
_ERFC_CLAMP = 4.0
_ERF_BLOCK = 32768


def _polynomial(z: np.ndarray, coeffs: Sequence[float], out: np.ndarray) -> None:
    """out = coeffs[0] z^n + ... + coeffs[n] (Horner, in place)."""
    np.multiply(z, coeffs[0], out=out)
    for c in coeffs[1:-1]:
        out += c
        out *= z
    out += coeffs[-1]


def _erf_block(x: np.ndarray, out: np.ndarray, work: np.ndarray) -> None:
    """erf of a 1-D block; `work` is [4, len(x)]. Two branches, each computed over the whole block with its
    argument clamped into range, then selected by |x|."""
    small, z, p, q = work
    np.clip(x, -_ERF_SPLIT, _ERF_SPLIT, out=small)
    np.multiply(small, small, out=z)
    _polynomial(z, _ERF_P, p)
    _polynomial(z, _ERF_Q, q)
    p /= q
    p *= small
    p += small                                   # erf on the small branch
    np.abs(x, out=z)
    np.clip(z, 0.0, _ERFC_CLAMP, out=z)
    use_small = z < _ERF_SPLIT
    np.multiply(z, 0.5, out=small)
    small += 1.0
    np.reciprocal(small, out=small)              # t
    _polynomial(small, _ERFC_C, q)
    np.multiply(z, z, out=z)
    q -= z
    np.exp(q, out=q)
    q *= small                                   # erfc(|x|)
    np.subtract(1.0, q, out=q)
    np.copysign(q, x, out=q)                     # erf on the large branch; x is read for the last time
    np.copyto(out, q)
    np.copyto(out, p, where=use_small)


def erf(x: np.ndarray, out: np.ndarray) -> None:
    """The error function of a float tensor into `out` (which may be `x`), in cache-sized blocks: the ~40 passes
    then stay in cache (2x faster than whole-array passes on a 2M-element tensor)."""
    if not (x.flags.c_contiguous and out.flags.c_contiguous):
        x, out_view = np.ascontiguousarray(x), np.empty(x.shape, out.dtype)
        erf(x, out_view)
        np.copyto(out, out_view)
        return
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    work = np.empty((4, min(_ERF_BLOCK, flat_x.size)), x.dtype)
    for start in range(0, flat_x.size, _ERF_BLOCK):
        stop = min(start + _ERF_BLOCK, flat_x.size)
        _erf_block(flat_x[start:stop], flat_out[start:stop], work[:, :stop - start])


class UnaryKernel(Kernel):
    """y = fn(x) elementwise, same shape and dtype; computed in place when the planner allows."""
    inplace = True
    fn: Callable[[np.ndarray, np.ndarray], None]
    numeric_only = False

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if self.numeric_only and x.dtype.kind not in "iuf":
            raise self.error(f"{x.dtype} tensors are not supported", NotSupportedError)
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.fn(inputs[0], outputs[0])

    def direct(self, inputs, outputs):
        return self.fn, inputs[0], outputs[0]


declare("Sqrt", "Exp", "Log", "Erf", "Neg", "Abs", layout=Layout(ELEMENTWISE))


@register("Sqrt", *FLOAT_TYPES)
class SqrtKernel(UnaryKernel):
    fn = staticmethod(lambda x, out: np.sqrt(x, out=out))


@register("Exp", *FLOAT_TYPES)
class ExpKernel(UnaryKernel):
    fn = staticmethod(lambda x, out: np.exp(x, out=out))


@register("Log", *FLOAT_TYPES)
class LogKernel(UnaryKernel):
    fn = staticmethod(lambda x, out: np.log(x, out=out))


@register("Erf", *FLOAT_TYPES)
class ErfKernel(UnaryKernel):
    fn = staticmethod(erf)


@register("Neg")
class NegKernel(UnaryKernel):
    numeric_only = True
    fn = staticmethod(lambda x, out: np.negative(x, out=out))


@register("Abs")
class AbsKernel(UnaryKernel):
    numeric_only = True
    fn = staticmethod(lambda x, out: np.absolute(x, out=out))
