"""An ONNX model as the converter's source (`converter.frontends.SourceModel`): parsed once, imported into IR,
its float initializers and the float weights held in its nodes the weights a training graph trains."""
from __future__ import annotations

import os
from typing import Collection

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter.frontends import SourceModel, read_bytes
from converter.frontends.onnx.importer import import_model
from converter.frontends.onnx.weights import node_weights
from converter.frontends.proto_text import undecodable_field
from converter.ir import Graph
from lite.status import GraphFileError
from schema import FMK_ONNX


def parse(data: bytes, source: str = "<buffer>") -> onnx.ModelProto:
    """The ONNX model in `data`, in the serialisation `source`'s extension names (binary protobuf by default),
    with its external data read from beside `source`."""
    fmt = onnx.serialization.registry.get_format_from_file_extension(os.path.splitext(source)[1])
    try:
        model = onnx.load_model_from_string(data, fmt)
        onnx.load_external_data_for_model(model, os.path.dirname(source))
    except Exception as e:
        raise GraphFileError(f"'{source}' is not a readable ONNX model: {e}") from e
    field = undecodable_field(model)
    if field:
        raise GraphFileError(f"'{source}' is not a readable ONNX model: {field} is not UTF-8 text")
    return model


def load_onnx(path: str | os.PathLike) -> onnx.ModelProto:
    """Read an ONNX file (external data included), reporting unreadable files as GraphFileError."""
    return parse(read_bytes(path), os.fspath(path))


def load(data: bytes, source: str = "<buffer>") -> OnnxSource:
    """The frontend's entry point (`converter.frontends.Frontend.load`)."""
    return OnnxSource(parse(data, source))


def as_source(model: SourceModel | onnx.ModelProto) -> SourceModel:
    """`model` as a frontend's model: the converter's entry points take an `onnx.ModelProto` too."""
    return OnnxSource(model) if isinstance(model, onnx.ModelProto) else model


class OnnxSource:
    fmk_type = FMK_ONNX

    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self._weights: dict[str, np.ndarray] | None = None

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        model = _weights_as_inputs(self.model, weights_as_inputs, self.float_weights()) if weights_as_inputs \
            else self.model
        return import_model(model, input_shapes)

    def float_weights(self) -> dict[str, np.ndarray]:
        """The floating-point initializers, or, in a model without any, the float weights held in nodes
        (`weights.node_weights`); decoded once."""
        if self._weights is None:
            arrays = {init.name: numpy_helper.to_array(init) for init in self.model.graph.initializer}
            held, parts = node_weights(self.model.graph, arrays)
            self._weights = {name: a for name, a in arrays.items()
                             if np.issubdtype(a.dtype, np.floating) and name not in parts}
            if not self._weights:       # weights in nodes; else the float constants are the exporter's own
                self._weights = held    # (a zero initial state, Resize scales), not weights
        return self._weights

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        """Node names as the importer spells them (an unnamed node is `<op_type>_<index>`)."""
        weights = self.float_weights()
        return [(n.name or f"{n.op_type}_{k}", [i for i in n.input if i in weights])
                for k, n in enumerate(self.model.graph.node)]


def _weights_as_inputs(model: onnx.ModelProto, names: Collection[str], weights: dict[str, np.ndarray]
                       ) -> onnx.ModelProto:
    """A copy of `model` with the weights `names` as graph inputs of their shape and type: initializers moved,
    a node holding a weight turned into an Identity of the input to an unused output (so the nodes keep their
    indices, which name unnamed nodes)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    kept = [i for i in g.initializer if i.name not in names]
    del g.initializer[:]
    g.initializer.extend(kept)
    for node in g.node:
        if node.output and node.output[0] in names:
            name = node.output[0]
            node.CopyFrom(helper.make_node("Identity", [name], [f"{name}/held"], name=node.name))
    declared = {i.name for i in g.input}
    g.input.extend(helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(weights[name].dtype),
                                                 list(weights[name].shape))
                   for name in weights if name in names and name not in declared)
    return copy
