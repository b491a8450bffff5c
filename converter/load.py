"""A model of any frontend turned into optimised IR: the start of every inference conversion, float or quantized
(a training graph runs the same passes in training mode: `converter.train`)."""
from __future__ import annotations

from typing import Iterable

import onnx

from converter.frontends import SourceModel
from converter.frontends.onnx import as_source
from converter.ir import Graph
from converter.passes import optimize
from lite.status import InputTensorError


def to_graph(model: SourceModel | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
             disabled_passes: Iterable[str] = ()) -> Graph:
    """Import and optimise: the IR just before export."""
    return optimize(as_source(model).to_ir(input_shapes), disabled_passes)


def to_inference_graph(model: SourceModel | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None,
                       disabled_passes: Iterable[str] = ()) -> Graph:
    """`to_graph`, keeping every entry point of a source that has several (a TFLite file's signature defs):
    each is imported and optimised on its own, then joined into one graph (`lite.signatures`). `input_shapes`
    names inputs as the entry points do; a name no entry point has is refused."""
    source = as_source(model)
    entries = source.entry_points() if hasattr(source, "entry_points") else {}   # only TFLite sources have some
    if len(entries) < 2:
        return to_graph(source, input_shapes, disabled_passes)
    from converter.frontends.tflite.signatures import join
    shapes, graphs = dict(input_shapes or {}), {}
    for key, entry in entries.items():
        own = {name: dims for name, dims in shapes.items() if name in entry.input_names}
        graphs[key] = to_graph(entry, own, disabled_passes)
    unknown = set(shapes) - {name for entry in entries.values() for name in entry.input_names}
    if unknown:
        raise InputTensorError(f"--inputShape names {sorted(unknown)}, which no signature has as an input")
    return join(graphs)
