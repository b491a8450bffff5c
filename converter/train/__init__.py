"""`--trainModel=true`: build the training graph of a model of any frontend ahead of time (format:
`docs/training.md`).

Pipeline: import, the shared optimisation passes in training mode (`optimize(training=True)`: no BatchNorm or
activation fusion, so every trainable parameter stays a tensor of its own; train-mode ops such as Dropout kept),
source weight names restored, then the training graph.
"""
from __future__ import annotations

import onnx

from converter.frontends import SourceModel
from converter.frontends.onnx import as_source
from converter.ir import Graph
from converter.passes import optimize
from converter.train.builder import OptimizerStart, build_training_graph
from converter.train.config import TrainParams, load_train_config, parse_train_flags
from converter.train.weights import restore_source_names, weights_up_to
from lite.traits import traits
from schema.train_format import LABELS, LEARNING_RATE, LOSS

__all__ = ["LABELS", "LEARNING_RATE", "LOSS", "OptimizerStart", "TrainParams", "build_training_graph", "forward_graph",
           "load_train_config", "parse_train_flags", "to_training_graph"]


def forward_graph(model: SourceModel | onnx.ModelProto, input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """The inference graph a training graph starts from: every weight under its source name. A weight that
    folding merges beyond recognition (PyTorch's recurrent layers export W, R and B as slices of their parameters,
    reordered and concatenated) is imported as a graph input instead, so the nodes computing from it stay, and then
    made the constant again: its gradient flows back through them."""
    model = as_source(model)
    weights = model.float_weights()
    graph = _passes(model.to_ir(input_shapes), model)
    lost = [name for name in weights if name not in graph.values]
    if not lost:
        return graph
    graph = _passes(model.to_ir(input_shapes, weights_as_inputs=lost), model)
    for name in lost:
        if name in graph.values:
            graph.inputs.remove(name)
            graph.values[name].const = weights[name]
    return graph


def _passes(graph: Graph, model: SourceModel) -> Graph:
    optimize(graph, training=True)
    restore_source_names(graph, model)
    _private_running_statistics(graph)
    return graph


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


def to_training_graph(model: SourceModel | onnx.ModelProto, params: TrainParams,
                      input_shapes: dict[str, list[int]] | None = None) -> Graph:
    """The training graph of `model` (a frontend's model, or an ONNX model) as `params` say."""
    model = as_source(model)
    params, start = _own_training(model, params)
    frozen = weights_up_to(model, params.freeze_until) if params.freeze_until else set()
    return build_training_graph(forward_graph(model, input_shapes), params, list(model.float_weights()), frozen,
                                start)


def _own_training(model: SourceModel, params: TrainParams) -> tuple[TrainParams, OptimizerStart]:
    """A model that is itself a training step (MindSpore's exported TrainOneStepCell: its `training(params)`)
    fixes the loss, the optimizer and where the optimizer starts; any other trains as `params` say."""
    training = getattr(model, "training", None)
    return training(params) if training else (params, OptimizerStart())
