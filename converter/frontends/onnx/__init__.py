"""ONNX frontend: an `onnx.ModelProto` (opset 7 and newer) becomes an IR graph of our canonical ops."""
from __future__ import annotations

from converter.frontends.onnx.importer import import_model, supported_ops
from converter.frontends.onnx.registry import IMPORTERS, onnx_op

__all__ = ["import_model", "supported_ops", "IMPORTERS", "onnx_op"]
