"""Reading an ONNX model and turning it into optimised IR: the start of every conversion (float, training,
quantized)."""
from __future__ import annotations

import os
from typing import Iterable

import onnx

from converter.frontends.onnx import import_model
from converter.ir import Graph
from converter.passes import optimize
from lite.status import GraphFileError


def load_onnx(path: str | os.PathLike) -> onnx.ModelProto:
    """Read an ONNX file (external data included), reporting unreadable files as GraphFileError."""
    try:
        return onnx.load(os.fspath(path))
    except FileNotFoundError:
        raise GraphFileError(f"model file '{path}' does not exist") from None
    except Exception as e:
        raise GraphFileError(f"'{path}' is not a readable ONNX model: {e}") from e


def to_graph(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
             disabled_passes: Iterable[str] = ()) -> Graph:
    """Import and optimise: the IR just before export."""
    return optimize(import_model(model, input_shapes), disabled_passes)
