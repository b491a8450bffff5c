"""TFLite frontend: a `.tflite` flatbuffer (schema version 3) becomes an IR graph of our canonical ops."""
from __future__ import annotations

from converter.frontends.tflite.importer import import_model, supported_ops
from converter.frontends.tflite.registry import IMPORTERS, tflite_op

__all__ = ["import_model", "supported_ops", "IMPORTERS", "tflite_op"]
