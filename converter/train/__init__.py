"""`--trainModel=true`: build the training graph of an ONNX model ahead of time (format: `docs/training.md`).

Pipeline: import, fold_constants, remove_identity with train-mode ops (Dropout) kept, to_nhwc (no BatchNorm or
activation fusion, so every trainable parameter stays a tensor of its own), source weight names restored, then the
training graph.
"""
from __future__ import annotations

import onnx

from converter.frontends.onnx import import_model
from converter.ir import Graph
from converter.passes.fold_constants import fold_constants
from converter.passes.remove_identity import remove_identity
from converter.passes.to_nhwc import to_nhwc
from converter.train.builder import build_training_graph
from converter.train.config import TrainParams, load_train_config, parse_train_flags
from converter.train.weights import float_initializers, restore_source_names, weights_up_to
from lite.traits import traits
from schema.train_format import LABELS, LEARNING_RATE, LOSS

__all__ = ["LABELS", "LEARNING_RATE", "LOSS", "TrainParams", "build_training_graph", "forward_graph",
           "load_train_config", "parse_train_flags", "to_training_graph"]

def forward_graph(model: onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """The inference graph a training graph starts from: every weight under its source name. A weight that
    folding merges beyond recognition (PyTorch's recurrent layers export W, R and B as slices of their parameters,
    reordered and concatenated) is imported as a graph input instead, so the nodes computing from it stay, and then
    made the constant again: its gradient flows back through them."""
    graph = _passes(import_model(model, input_shapes), model)
    lost = [name for name in float_initializers(model) if name not in graph.values]
    if not lost:
        return graph
    graph = _passes(import_model(_initializers_as_inputs(model, lost), input_shapes), model)
    for name, array in float_initializers(model).items():
        if name in lost and name in graph.values:
            graph.inputs.remove(name)
            graph.values[name].const = array
    return graph


def _passes(graph: Graph, model: onnx.ModelProto) -> Graph:
    fold_constants(graph)
    remove_identity(graph, training=True)     # Dropout is the identity only at inference
    to_nhwc(graph)
    fold_constants(graph)
    restore_source_names(graph, model)
    _private_running_statistics(graph)
    return graph


def _initializers_as_inputs(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    """A copy of `model` with the initializers `names` as graph inputs of their shape and type."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    moved = [i for i in g.initializer if i.name in names]
    kept = [i for i in g.initializer if i.name not in names]
    del g.initializer[:]
    g.initializer.extend(kept)
    declared = {i.name for i in g.input}
    g.input.extend(onnx.helper.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in moved
                   if i.name not in declared)
    return copy


def _private_running_statistics(graph: Graph) -> None:
    """Training updates a BatchNorm's mean and variance in place (`traits(op).train.state_inputs`), so each must
    be a constant of its own. An exporter may have shared one tensor between roles (PyTorch deduplicates equal
    initializers: a fresh layer's running mean of zeros becomes an Identity of its zero bias), so shared ones are
    copied."""
    for node in list(graph.nodes):
        mode = traits(node.op).train
        for k, role in mode.state_inputs if mode else ():
            name = node.inputs[k]
            if sum(n.inputs.count(name) for n in graph.nodes) > 1 or name in graph.outputs:
                node.inputs[k] = graph.add_const(graph.const(name).copy(), f"{node.name}/{role}")


def to_training_graph(model: onnx.ModelProto, params: TrainParams,
                      input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """The training graph of `model` as `params` say."""
    frozen = weights_up_to(model, params.freeze_until) if params.freeze_until else set()
    return build_training_graph(forward_graph(model, input_shapes), params, list(float_initializers(model)), frozen)
