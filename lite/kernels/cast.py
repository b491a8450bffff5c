"""Cast: convert x to the dtype of TypeId `to`, elementwise. Any input dtype.

Integers and floats follow C (floats truncate toward zero when cast to integers; anything non-zero is true).
The ml_dtypes types follow ONNX: float8 targets round to nearest even and, with `saturate`, clamp finite
overflow and infinities to the largest finite value (NaN stays NaN); without it, overflow becomes inf or NaN
as the type has them. float8e8m0 keeps only the exponent, rounded as `round_mode` says.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite import dtypes
from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import LiteError, NotSupportedError
from lite.traits import ELEMENTWISE, SAME_DTYPE, Layout, declare
from schema import fb

SATURATING = (DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ)


def numpy_dtype(kernel: Kernel, type_id: int) -> np.dtype:
    """The numpy dtype of a TypeId attribute; an unknown id is the kernel's NotSupportedError."""
    try:
        return dtypes.to_numpy(type_id)
    except LiteError as e:
        raise kernel.error(f"data type id {type_id} is not supported ({e.args[0]})", NotSupportedError) from None


def float8e8m0(x: np.ndarray, saturate: bool, round_mode: int) -> np.ndarray:
    """The float8e8m0 bit patterns (biased exponents, 0xFF = NaN) of float32 `x`: the exponent alone, rounded
    up / to nearest / down by the mantissa; `saturate` keeps the largest exponent from rounding into NaN."""
    bits = np.ascontiguousarray(x, np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == fb.CastRounding.UP:
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == fb.CastRounding.NEAREST:
        guard, rest = (bits & 0x400000) > 0, (bits & 0x3FFFFF) > 0
        up = guard & (rest | (exponent > 0))
    else:
        up = np.zeros(bits.shape, bool)
    if saturate:
        up &= exponent != 0xFE
    exponent = np.where(special, 0xFF, exponent + (up & ~special))
    return np.minimum(exponent, 0xFF).astype(np.uint8)


def cast_into(x: np.ndarray, out: np.ndarray, to: int, saturate: bool = True,
              round_mode: int = fb.CastRounding.UP) -> None:
    """out[...] = x converted to out's dtype (TypeId `to`) by the rules in the module docstring."""
    if to in SATURATING and saturate and x.dtype != out.dtype:
        info = dtypes.finfo(out.dtype)
        x = np.clip(x.astype(np.float32), info.min, info.max)
    elif to == DataType.FLOAT8E8M0 and x.dtype != out.dtype:
        np.copyto(out.view(np.uint8), float8e8m0(x.astype(np.float32), saturate, round_mode))
        return
    np.copyto(out, x, casting="unsafe")


declare("Cast", layout=Layout(ELEMENTWISE), noop=SAME_DTYPE)


@register("Cast")
class CastKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        return [TensorSpec(x.shape, numpy_dtype(self, self.attrs.to))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        cast_into(inputs[0], outputs[0], self.attrs.to, self.attrs.saturate, self.attrs.round_mode)
