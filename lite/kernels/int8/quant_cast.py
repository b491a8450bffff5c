"""QuantDTypeCast(src_t, dst_t): float32 <-> int8 / uint8 / int16 at the borders of quantized segments.

Quantize: q = clamp(rint(x / s) + zp) (half to even, float32 arithmetic like ONNX QuantizeLinear), with the
output tensor's params; dequantize: x = (q - zp) * s, with the input tensor's params. Per-channel params apply
along the tensor's `quant_axis` (weight-only models fold the cast at compile time).
Optional inputs 1 and 2 (scale, zero point; ONNX's general form) replace the tensor's params: they broadcast
against x at run time, so the importer reshapes per-axis ones.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from lite import dtypes
from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.int8.requantize import scales, tensor_range, zero_points
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare

INTEGER_TYPES = (DataType.INT8, DataType.UINT8, DataType.INT16)


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
    q = np.divide(x, scale.astype(np.float32), dtype=np.float32)
    np.rint(q, out=q)
    q += zero_point.astype(np.float32)
    np.fmax(q, lo, out=q)
    np.fmin(q, hi, out=q)
    np.copyto(out, q, casting="unsafe")


def dequantize(q: np.ndarray, scale: np.ndarray, zero_point: np.ndarray, out: np.ndarray) -> None:
    """out = (q - zp) * scale in float32 (exact integers before the one rounding multiply)."""
    np.subtract(q, zero_point.astype(np.float32), out=out, dtype=np.float32)
    out *= scale.astype(np.float32)


declare("QuantDTypeCast", layout=Layout(ELEMENTWISE))


@register("QuantDTypeCast", DataType.FLOAT32, *INTEGER_TYPES)
@register("QuantDTypeCast", *INTEGER_TYPES, quantized=True)
class QuantDTypeCastKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        src, dst = dtypes.from_numpy(x.dtype), a.dst_t
        if a.src_t and a.src_t != src:
            raise self.error(f"src_t is {dtypes.type_name(a.src_t)} but the input is {x.dtype}")
        pair = {src, dst}
        if DataType.FLOAT32 not in pair or not pair & set(INTEGER_TYPES) or len(pair) != 2:
            raise self.error(f"casts between float32 and int8/uint8/int16 only, not {dtypes.type_name(src)} "
                             f"-> {dtypes.type_name(dst)}", NotSupportedError)
        self.quantizing = dst != DataType.FLOAT32
        out_dtype = dtypes.to_numpy(dst)
        self.given = len(inputs) > 1 and inputs[1] is not None
        if self.given:
            info = np.iinfo(out_dtype if self.quantizing else x.dtype)
            self.bounds = (int(info.min), int(info.max))
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
        if self.quantizing:
            quantize(inputs[0], scale, zero_point, *self.bounds, outputs[0])
        else:
            dequantize(inputs[0], scale, zero_point, outputs[0])
