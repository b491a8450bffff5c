"""The model converter: a model of any frontend (`converter.frontends`: ONNX, TFLite) -> IR -> optimisation
passes -> quantization or a training graph, alike for every frontend -> `.ms` FlatBuffers."""
from __future__ import annotations

import os
from typing import Iterable, Sequence

import onnx

from converter.export import DEFAULT_SAVE_TYPE, to_bytes, writer
from converter.frontends import SourceModel, frontend, read_model
from converter.frontends.onnx import as_source, load_onnx
from converter.ir import Graph
from converter.load import to_graph, to_inference_graph
from converter.quant import convert_quantized
from converter.quant.config import QuantConfig
from converter.train import TrainParams, to_training_graph
from lite import protect
from lite.status import NotSupportedError
from lite.atomic_file import write_atomic

__all__ = ["convert", "convert_file", "convert_for_training", "convert_tflite", "load_onnx", "tflite_to_graph",
           "to_graph"]


def tflite_to_graph(data: bytes, input_shapes: dict[str, list[int]] | None = None,
                    disabled_passes: Iterable[str] = (), source: str = "<buffer>") -> Graph:
    """Import a `.tflite` buffer and optimise: the IR just before export (needs the `tflite` package)."""
    return to_graph(frontend("TFLITE").load(data, source), input_shapes, disabled_passes)


def convert_tflite(data: bytes, input_shapes: dict[str, list[int]] | None = None, source: str = "<buffer>",
                   save_type: str = DEFAULT_SAVE_TYPE) -> bytes:
    """A `.tflite` model as `.ms` bytes (of `save_type`'s format: `converter.export.SAVE_TYPES`)."""
    return convert(frontend("TFLITE").load(data, source), input_shapes, save_type=save_type)


def convert(model: SourceModel | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
            disabled_passes: Iterable[str] = (), fp16: bool = False, save_type: str = DEFAULT_SAVE_TYPE) -> bytes:
    """A frontend's model (or an ONNX model) as `.ms` bytes; `fp16` stores its float weights as float16
    (`--fp16=on`)."""
    model = as_source(model)
    graph = to_inference_graph(model, input_shapes, disabled_passes)
    if fp16:
        from converter.quant.fp16 import store_float16
        graph = store_float16(graph)
    return to_bytes(graph, model.fmk_type, save_type)


def convert_for_training(model: SourceModel | onnx.ModelProto, params: TrainParams,
                         input_shapes: dict[str, list[int]] | None = None, save_type: str = DEFAULT_SAVE_TYPE) -> bytes:
    """A frontend's model (or an ONNX model) as a training `.ms` (eval, gradients and optimizer subgraphs; see
    docs/training.md)."""
    model = as_source(model)
    return to_bytes(to_training_graph(model, params, input_shapes), model.fmk_type, save_type)


def convert_file(model_file: str | os.PathLike, output_file: str | os.PathLike,
                 input_shapes: dict[str, list[int]] | None = None, train_params: TrainParams | None = None,
                 quant_config: QuantConfig | None = None, encrypt_key: str | bytes | None = None,
                 integrity: bool = False, fmk: str = "ONNX", fp16: bool = False,
                 save_type: str = DEFAULT_SAVE_TYPE, signatures: Sequence[str] = ()) -> str:
    """Convert `model_file` (read by the frontend of `fmk`: `converter.frontends.FRONTENDS`) — for training
    when `train_params` is given, quantized when `quant_config` is, with float16 weights when `fp16` is (float
    inference only) — and write `<output_file>.ms` atomically, AES-GCM encrypted with `encrypt_key` or with a
    SHA-256 integrity footer when `integrity` is set (`lite.protect`), in `save_type`'s format (`--saveType`:
    `converter.export.SAVE_TYPES`); returns the written path. `signatures` keeps only these entry points of a
    TFLite file with several (`--signatures`; default: all)."""
    writer(save_type)       # an unknown save type is refused before any work
    out = os.fspath(output_file)
    if not out.endswith(".ms"):
        out += ".ms"
    model = read_model(fmk, model_file)
    if signatures:
        if not hasattr(model, "keep_signatures"):
            raise NotSupportedError(f"--signatures: a {fmk} model has no signatures (TFLite files have them)")
        model = model.keep_signatures(signatures)
    if train_params is not None:
        data = convert_for_training(model, train_params, input_shapes, save_type)
    elif quant_config is not None:
        data = convert_quantized(model, quant_config, input_shapes, save_type=save_type)
    else:
        data = convert(model, input_shapes, fp16=fp16, save_type=save_type)
    if encrypt_key is not None:
        data = protect.encrypt(data, encrypt_key)
    elif integrity:
        data = protect.with_integrity(data)
    write_atomic(out, data)
    return out
