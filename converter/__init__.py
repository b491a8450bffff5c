"""The model converter: ONNX or TFLite -> IR -> optimisation passes -> `.ms` FlatBuffers."""
from __future__ import annotations

import os
from typing import Iterable

import onnx

from converter.export import to_bytes
from converter.ir import Graph
from converter.load import load_onnx, to_graph
from converter.passes import optimize
from converter.quant import convert_quantized
from converter.quant.config import QuantConfig
from converter.train import TrainParams, to_training_graph
from lite import protect
from lite.serialize import write_atomic
from lite.status import GraphFileError, NotSupportedError
from schema import FMK_TFLITE

__all__ = ["convert", "convert_file", "convert_for_training", "convert_tflite", "load_onnx", "tflite_to_graph",
           "to_graph"]


def _read_bytes(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise GraphFileError(f"model file '{path}' does not exist") from None
    except OSError as e:
        raise GraphFileError(f"model file '{path}' cannot be read: {e.strerror or e}") from None


def tflite_to_graph(data: bytes, input_shapes: dict[str, list[int]] | None = None,
                    disabled_passes: Iterable[str] = (), source: str = "<buffer>") -> Graph:
    """Import a `.tflite` buffer and optimise: the IR just before export (needs the `tflite` package)."""
    try:
        from converter.frontends import tflite
    except ImportError as e:
        raise NotSupportedError(f"the TFLite frontend needs the 'tflite' package (pip install "
                                f"'mslite-py[tflite]'): {e}") from None
    return optimize(tflite.import_model(data, input_shapes, source), disabled_passes)


def convert_tflite(data: bytes, input_shapes: dict[str, list[int]] | None = None, source: str = "<buffer>") -> bytes:
    """A `.tflite` model as `.ms` bytes."""
    return to_bytes(tflite_to_graph(data, input_shapes, source=source), FMK_TFLITE)


def convert(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
            disabled_passes: Iterable[str] = (), fp16: bool = False) -> bytes:
    """An ONNX model as `.ms` bytes; `fp16` stores its float weights as float16 (`--fp16=on`)."""
    graph = to_graph(model, input_shapes, disabled_passes)
    if fp16:
        from converter.quant.fp16 import store_float16
        graph = store_float16(graph)
    return to_bytes(graph)


def convert_for_training(model: onnx.ModelProto, params: TrainParams,
                         input_shapes: dict[str, list[int]] | None = None) -> bytes:
    """An ONNX model as a training `.ms` (eval, gradients and optimizer subgraphs; see docs/training.md)."""
    return to_bytes(to_training_graph(model, params, input_shapes))


def convert_file(model_file: str | os.PathLike, output_file: str | os.PathLike,
                 input_shapes: dict[str, list[int]] | None = None, train_params: TrainParams | None = None,
                 quant_config: QuantConfig | None = None, encrypt_key: str | bytes | None = None,
                 integrity: bool = False, fmk: str = "ONNX", fp16: bool = False) -> str:
    """Convert `model_file` (`fmk` "ONNX" or "TFLITE"; training and quantization take ONNX models) — for
    training when `train_params` is given, quantized when `quant_config` is, with float16 weights when `fp16`
    is (float ONNX inference only) — and write `<output_file>.ms` atomically, AES-GCM encrypted with
    `encrypt_key` or with a SHA-256 integrity footer when `integrity` is set (`lite.protect`); returns the
    written path."""
    out = os.fspath(output_file)
    if not out.endswith(".ms"):
        out += ".ms"
    if fmk == "TFLITE":
        if train_params is not None or quant_config is not None:
            raise NotSupportedError("training and post-training quantization take ONNX models; a quantized "
                                    ".tflite file converts as it is")
        data = convert_tflite(_read_bytes(model_file), input_shapes, os.fspath(model_file))
    elif train_params is not None:
        data = convert_for_training(load_onnx(model_file), train_params, input_shapes)
    elif quant_config is not None:
        data = convert_quantized(load_onnx(model_file), quant_config, input_shapes)
    else:
        data = convert(load_onnx(model_file), input_shapes, fp16=fp16)
    if encrypt_key is not None:
        data = protect.encrypt(data, encrypt_key)
    elif integrity:
        data = protect.with_integrity(data)
    write_atomic(out, data)
    return out
