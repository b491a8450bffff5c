"""QuantDTypeCast(src_t, dst_t): float32 <-> int8 / uint8 / int16 at the borders of quantized segments, and
ONNX's QuantizeLinear / DequantizeLinear in general.

Quantize: q = clamp(rint(x / s) + zp) (half to even, float32 arithmetic like ONNX QuantizeLinear), with the
output tensor's params (MindSpore Lite's kernels, a node whose `rounding` is NNACL: round(x * (1 / s) + zp), half
away from zero, in float32); dequantize: x = (q - zp) * s, with the input tensor's params. Per-channel params apply
along the tensor's `quant_axis` (weight-only models fold the cast at compile time).
Optional inputs 1 and 2 (scale, zero point; ONNX's general form) replace the tensor's params: they broadcast
against x at run time, so the importer reshapes per-axis ones and repeats blocked ones. That form also takes
float16 / bfloat16 real values and the uint16, 4-bit, 2-bit, float8 and float4 quantized types (ONNX's rules:
integers clamp to their range; float8 rounds like Cast, saturating when `saturate`).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lite import dtypes
from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.cast import cast_into
from lite.kernels.int8.requantize import NNACL, scales, tensor_range, zero_points
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare

INTEGER_TYPES = (DataType.INT8, DataType.UINT8, DataType.INT16)     # with params on the tensors, too
FLOAT_QUANTIZED = (DataType.FLOAT8E4M3FN, DataType.FLOAT8E4M3FNUZ, DataType.FLOAT8E5M2, DataType.FLOAT8E5M2FNUZ,
                   DataType.FLOAT4E2M1)
GENERAL_TYPES = (DataType.UINT16, DataType.INT4, DataType.UINT4, DataType.INT2, DataType.UINT2, *FLOAT_QUANTIZED)
REAL_TYPES = (DataType.FLOAT32, DataType.FLOAT16, DataType.BFLOAT16)


def channel_layout(shape: tuple[int, ...], count: int, axis: int) -> tuple[int, ...]:
    """Shape that broadcasts `count` per-channel values along `axis` of a tensor of `shape` (() when
    per-tensor); ValueError when that axis does not have `count` entries."""
    if count == 1:
        return ()
    if not -len(shape) <= axis < len(shape) or shape[axis] != count:
        raise ValueError(f"{count} quantization parameters do not fit axis {axis} of shape {list(shape)}")
    axis %= len(shape)
    return tuple(count if i == axis else 1 for i in range(len(shape)))


def quantize(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
    """out = clamp(rint(x / scale) + zp, lo, hi), computed in float32. Infinities saturate; NaN becomes `lo`
    (fmax/fmin pass over NaN, where a plain clip would leave it for an undefined integer cast)."""
    q = np.asarray(np.divide(x.astype(np.float32, copy=False), scale.astype(np.float32), dtype=np.float32))
    np.rint(q, out=q)       # asarray: a 0-d quotient is a numpy scalar, which cannot be an `out`
    q += zero_point.astype(np.float32)
    np.fmax(q, lo, out=q)
    np.fmin(q, hi, out=q)
    np.copyto(out, q, casting="unsafe")


def quantize_nnacl(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, lo: int, hi: int,
                   out: np.ndarray) -> None:
    """out = clamp(round(x * (1 / scale) + zp), lo, hi), half away from zero, in float32: MindSpore Lite's."""
    inverse = np.float32(1) / scale.astype(np.float32)
    q = np.asarray(np.multiply(x.astype(np.float32, copy=False), inverse, dtype=np.float32))
    q += zero_point.astype(np.float32)
    sign = np.sign(q)
    np.abs(q, out=q)
    q += np.float32(0.5)
    np.floor(q, out=q)
    q *= sign
    np.fmax(q, lo, out=q)
    np.fmin(q, hi, out=q)
    np.copyto(out, q, casting="unsafe")


def quantize_float(x: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, out: np.ndarray, to: int,
                   saturate: bool) -> None:
    """Float8 / float4 targets (ONNX): x / scale rounded to the type as Cast does; float4 adds its zero point,
    float8 zero points are zero."""
    q = np.divide(x.astype(np.float32, copy=False), scale.astype(np.float32), dtype=np.float32)
    if to == DataType.FLOAT4E2M1:
        q += zero_point.astype(np.float32)
    cast_into(q, out, to, saturate)


def dequantize(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, out: np.ndarray) -> None:
    """out = (q - zp) * scale in float32 (exact integers before the one rounding multiply), stored as out's
    float type."""
    real = np.subtract(q.astype(np.float32, copy=False), zero_point.astype(np.float32), dtype=np.float32)
    real *= scale.astype(np.float32)
    np.copyto(out, real, casting="unsafe")


declare("QuantDTypeCast", layout=Layout(ELEMENTWISE))


@register("QuantDTypeCast", *REAL_TYPES, *INTEGER_TYPES, *GENERAL_TYPES)
@register("QuantDTypeCast", *INTEGER_TYPES, quantized=True)
class QuantDTypeCastKernel(Kernel):
    native_dtypes = True     # float16 / bfloat16 sides are handled here, in float32

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        src, dst = dtypes.from_numpy(x.dtype), a.dst_t
        if a.src_t and a.src_t != src:
            raise self.error(f"src_t is {dtypes.type_name(a.src_t)} but the input is {x.dtype}")
        self.given = len(inputs) > 1 and inputs[1] is not None
        quantized = INTEGER_TYPES + GENERAL_TYPES if self.given else INTEGER_TYPES
        real = REAL_TYPES if self.given else (DataType.FLOAT32,)
        if not ((src in real and dst in quantized) or (src in quantized and dst in real)):
            raise self.error(f"casts between {', '.join(map(dtypes.type_name, real))} and "
                             f"{', '.join(map(dtypes.type_name, quantized))} only, not {dtypes.type_name(src)} "
                             f"-> {dtypes.type_name(dst)}", NotSupportedError)
        self.quantizing = dst in quantized
        out_dtype = dtypes.to_numpy(dst)
        if self.given:
            self.bounds = None if dst in FLOAT_QUANTIZED or not self.quantizing else \
                tuple(int(v) for v in (dtypes.iinfo(out_dtype).min, dtypes.iinfo(out_dtype).max))
            return [TensorSpec(x.shape, out_dtype)]
        params: list[Any] = self.out_quant[0] if self.quantizing else (x.quant or [])
        if not params:
            side = "output" if self.quantizing else "input"
            raise self.error(f"the {side} tensor has no quantization parameters", NotSupportedError)
        try:
            layout = channel_layout(x.shape, len(params), 0 if self.quantizing else x.quant_axis)
        except ValueError as e:
            raise self.error(str(e)) from None
        self.scale = scales(params).reshape(layout)
        self.zero_point = zero_points(params).reshape(layout)
        self.bounds = tensor_range(params, out_dtype) if self.quantizing else None
        return [TensorSpec(x.shape, out_dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.given:
            scale = inputs[1]
            zero_point = inputs[2] if len(inputs) > 2 and inputs[2] is not None else np.zeros(1, np.int64)
        else:
            scale, zero_point = self.scale, self.zero_point
        if not self.quantizing:
            dequantize(inputs[0], scale, zero_point, outputs[0])
        elif self.bounds is None:
            quantize_float(inputs[0], scale, zero_point, outputs[0], self.attrs.dst_t, self.attrs.saturate)
        elif self.node.rounding == NNACL:
            quantize_nnacl(inputs[0], scale, zero_point, *self.bounds, outputs[0])
        else:
            quantize(inputs[0], scale, zero_point, *self.bounds, outputs[0])
