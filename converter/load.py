"""A model of any frontend turned into optimised IR: the start of every inference conversion, float or quantized
(a training graph runs the same passes in training mode: `converter.train`)."""
from __future__ import annotations

from typing import Iterable

import onnx

from converter.frontends import SourceModel
from converter.frontends.onnx import as_source
from converter.ir import Graph
from converter.passes import optimize


def to_graph(model: SourceModel | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
             disabled_passes: Iterable[str] = ()) -> Graph:
    """Import and optimise: the IR just before export."""
    return optimize(as_source(model).to_ir(input_shapes), disabled_passes)
