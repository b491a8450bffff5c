"""TFLite frontend: a `.tflite` flatbuffer (schema version 3) becomes an IR graph of our canonical ops."""
from __future__ import annotations

from converter.frontends.tflite.importer import import_model, supported_ops
from converter.frontends.tflite.registry import IMPORTERS, tflite_op
from converter.frontends.tflite.source import TFLiteSource, load

__all__ = ["import_model", "load", "supported_ops", "IMPORTERS", "TFLiteSource", "tflite_op"]
