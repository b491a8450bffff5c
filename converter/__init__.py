"""The model converter: ONNX -> IR -> optimisation passes -> `.ms` FlatBuffers."""
from __future__ import annotations

import os
from typing import Iterable

import onnx

from converter.export import to_bytes
from converter.load import load_onnx, to_graph
from converter.quant import convert_quantized
from converter.quant.config import QuantConfig
from converter.train import TrainParams, to_training_graph
from lite import protect
from lite.serialize import write_atomic

__all__ = ["convert", "convert_file", "convert_for_training", "load_onnx", "to_graph"]


def convert(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
            disabled_passes: Iterable[str] = ()) -> bytes:
    """An ONNX model as `.ms` bytes."""
    return to_bytes(to_graph(model, input_shapes, disabled_passes))


def convert_for_training(model: onnx.ModelProto, params: TrainParams,
                         input_shapes: dict[str, list[int]] | None = None) -> bytes:
    """An ONNX model as a training `.ms` (eval, gradients and optimizer subgraphs; see docs/training.md)."""
    return to_bytes(to_training_graph(model, params, input_shapes))


def convert_file(model_file: str | os.PathLike, output_file: str | os.PathLike,
                 input_shapes: dict[str, list[int]] | None = None, train_params: TrainParams | None = None,
                 quant_config: QuantConfig | None = None, encrypt_key: str | bytes | None = None,
                 integrity: bool = False) -> str:
    """Convert `model_file` — for training when `train_params` is given, quantized when `quant_config` is — and
    write `<output_file>.ms` atomically, AES-GCM encrypted with `encrypt_key` or with a SHA-256 integrity footer
    when `integrity` is set (`lite.protect`); returns the written path."""
    out = os.fspath(output_file)
    if not out.endswith(".ms"):
        out += ".ms"
    model = load_onnx(model_file)
    if train_params is not None:
        data = convert_for_training(model, train_params, input_shapes)
    elif quant_config is not None:
        data = convert_quantized(model, quant_config, input_shapes)
    else:
        data = convert(model, input_shapes)
    if encrypt_key is not None:
        data = protect.encrypt(data, encrypt_key)
    elif integrity:
        data = protect.with_integrity(data)
    write_atomic(out, data)
    return out
