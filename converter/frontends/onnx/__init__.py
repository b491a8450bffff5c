"""ONNX frontend: an `onnx.ModelProto` (opset 7 and newer) becomes an IR graph of our canonical ops."""
from __future__ import annotations

from converter.frontends.onnx.importer import import_model, supported_ops
from converter.frontends.onnx.registry import IMPORTERS, onnx_op
from converter.frontends.onnx.source import OnnxSource, as_source, load, load_onnx

__all__ = ["as_source", "import_model", "load", "load_onnx", "supported_ops", "IMPORTERS", "OnnxSource", "onnx_op"]
