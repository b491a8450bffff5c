"""ONNX importer rules for the signal ops: DFT, STFT, the three cosine windows and MelWeightMatrix."""
from __future__ import annotations

from onnx import TensorProto

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules.tensor_ops import _onnx_type_id
from schema import fb

_WINDOWS = {"HannWindow": fb.WindowKind.HANN, "HammingWindow": fb.WindowKind.HAMMING,
            "BlackmanWindow": fb.WindowKind.BLACKMAN}


def _output_type(ctx: ImportContext) -> int:
    return _onnx_type_id(ctx, int(ctx.attr("output_datatype", TensorProto.FLOAT)), "output_datatype")


@onnx_op(*_WINDOWS)
def window(ctx: ImportContext) -> None:
    ctx.emit("Window", ctx.inputs, ctx.outputs, kind=_WINDOWS[ctx.node.op_type],
             periodic=bool(ctx.attr("periodic", 1)), data_type=_output_type(ctx))


@onnx_op("MelWeightMatrix")
def mel_weight_matrix(ctx: ImportContext) -> None:
    ctx.emit("MelWeightMatrix", ctx.inputs, ctx.outputs, data_type=_output_type(ctx))


@onnx_op("DFT")
def dft(ctx: ImportContext) -> None:
    """Opset 17 has the axis as an attribute (default 1); opset 20 as an optional input (default -2)."""
    axis = int(ctx.attr("axis", 1)) if ctx.opset < 20 else -2
    ctx.emit("DFT", ctx.inputs[:3], ctx.outputs, axis=axis, inverse=bool(ctx.attr("inverse", 0)),
             onesided=bool(ctx.attr("onesided", 0)))


@onnx_op("STFT")
def stft(ctx: ImportContext) -> None:
    ctx.emit("STFT", ctx.inputs, ctx.outputs, onesided=bool(ctx.attr("onesided", 1)))
