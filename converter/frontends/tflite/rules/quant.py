"""TFLite importer rules for QUANTIZE, DEQUANTIZE and DENSIFY.

DEQUANTIZE of a constant (float16 weights, int8 weights) folds into a float32 constant; of an activation it is a
QuantDTypeCast to float32. QUANTIZE of a float tensor is a QuantDTypeCast with the output's params; QUANTIZE
between two quantized types (a requantization) goes through float. DENSIFY's input was densified when the file
was read, so it is the constant itself.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, dequantized, tflite_op
from lite.dtypes import DataType, from_numpy


@tflite_op("DEQUANTIZE", quant="int8")
def dequantize(ctx: ImportContext) -> None:
    x, out = ctx.input(0), ctx.outputs[0]
    value = ctx.value(x)
    if value.const is not None:
        real = dequantized(value) if value.quant_params else value.const.astype(np.float32)
        ctx.graph.values[out].shape, ctx.graph.values[out].dtype, ctx.graph.values[out].const = (
            real.shape, real.dtype, real)
        return
    if not value.quant_params:
        ctx.emit("Cast", [x], ctx.outputs, to=DataType.FLOAT32)
        return
    ctx.emit("QuantDTypeCast", [x], ctx.outputs, src_t=from_numpy(value.dtype), dst_t=DataType.FLOAT32)


@tflite_op("QUANTIZE", quant="int8")
def quantize(ctx: ImportContext) -> None:
    x, out = ctx.input(0), ctx.outputs[0]
    if not ctx.value(out).quant_params:
        raise ctx.error("the output has no quantization parameters")
    if ctx.quantized(x):
        x = ctx.emit1("QuantDTypeCast", [x], src_t=from_numpy(ctx.value(x).dtype), dst_t=DataType.FLOAT32)
    ctx.emit("QuantDTypeCast", [x], [out], src_t=DataType.FLOAT32, dst_t=from_numpy(ctx.value(out).dtype))


@tflite_op("DENSIFY")
def densify(ctx: ImportContext) -> None:
    ctx.emit("Identity", [ctx.input(0)], ctx.outputs)
