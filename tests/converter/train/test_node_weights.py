"""Float weights held in nodes — Constant nodes (as Paddle2ONNX writes every weight), or constants behind Identity,
Cast or DequantizeLinear — train like initializers: the same trainable weights, the same losses step by step."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import models
from converter.frontends.onnx import as_source
from converter.train import TrainParams
from tests.util import train_session_for, train_step

PARAMS = TrainParams(optimizer="momentum", learning_rate=0.05)


def _weights_replaced(model: onnx.ModelProto, holders) -> onnx.ModelProto:
    """A copy of `model` whose float initializers are replaced by what `holders(name, array)` gives: (nodes
    writing `name`, first in the graph, and the initializers they read)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    nodes, initializers = [], []
    for init in g.initializer:
        more_nodes, more_initializers = holders(init.name, numpy_helper.to_array(init))
        nodes += more_nodes
        initializers += more_initializers
    names = {i.name for i in g.initializer}
    inputs = [i for i in g.input if i.name not in names]
    for field, items in ((g.initializer, initializers), (g.input, inputs), (g.node, nodes + list(g.node))):
        del field[:]
        field.extend(items)
    return copy


def _held_in_nodes(model: onnx.ModelProto, form: str) -> onnx.ModelProto:
    """`model` with every float initializer held in nodes instead: a Constant node ("constant"), an Identity of
    one ("identity"), a Cast of a float64 Constant ("cast", rounding back to the same float32 values)."""
    def holders(name: str, array: np.ndarray) -> tuple[list, list]:
        if form == "cast":
            return [helper.make_node("Constant", [], [f"{name}/f64"],
                                     value=numpy_helper.from_array(array.astype(np.float64))),
                    helper.make_node("Cast", [f"{name}/f64"], [name], to=onnx.TensorProto.FLOAT)], []
        if form == "identity":
            return [helper.make_node("Constant", [], [f"{name}/c"], value=numpy_helper.from_array(array)),
                    helper.make_node("Identity", [f"{name}/c"], [name])], []
        return [helper.make_node("Constant", [], [name], value=numpy_helper.from_array(array))], []
    return _weights_replaced(model, holders)


def _quantized_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each float initializer stored as int8 per tensor and read through a DequantizeLinear."""
    def holders(name: str, array: np.ndarray) -> tuple[list, list]:
        scale = np.float32(max(float(np.abs(array).max()), 1e-8) / 127)
        q = np.clip(np.rint(array / scale), -127, 127).astype(np.int8)
        return ([helper.make_node("DequantizeLinear", [f"{name}/q", f"{name}/s"], [name])],
                [numpy_helper.from_array(q, f"{name}/q"), numpy_helper.from_array(np.array(scale), f"{name}/s")])
    return _weights_replaced(model, holders)


def _dequantized(model: onnx.ModelProto) -> onnx.ModelProto:
    """The float-initializer twin of `_quantized_weights(model)`: the same float32 values as initializers."""
    quantized = _quantized_weights(model)
    arrays = {i.name: numpy_helper.to_array(i) for i in quantized.graph.initializer}
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for init in copy.graph.initializer:
        q, s = arrays[f"{init.name}/q"], arrays[f"{init.name}/s"]
        init.CopyFrom(numpy_helper.from_array((q.astype(np.float32) * s).astype(np.float32), init.name))
    return copy


def _losses(model: onnx.ModelProto, steps: int = 4) -> list[float]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 1, 32, 32)).astype(np.float32)
    labels = np.array([3, 7], np.int32)
    session = train_session_for(model, PARAMS)
    return [train_step(session, x, labels) for _ in range(steps)]


@pytest.fixture(scope="module")
def lenet() -> onnx.ModelProto:
    return models.build("lenet5", batch=2)


@pytest.mark.parametrize("form", ["constant", "identity", "cast"])
def test_weights_in_nodes_train_like_initializers(lenet, form):
    held = _held_in_nodes(lenet, form)
    assert not held.graph.initializer
    assert list(as_source(held).float_weights()) == [i.name for i in lenet.graph.initializer]
    want = _losses(lenet)
    assert want[-1] < want[0]
    assert _losses(held) == want


def test_dequantized_weights_train_like_their_float_values(lenet):
    quantized = _quantized_weights(lenet)
    assert list(as_source(quantized).float_weights()) == [i.name for i in lenet.graph.initializer]
    assert _losses(quantized) == _losses(_dequantized(lenet))


def test_scalar_constants_stay_constants():
    """An epsilon or a clip bound in a Constant node is not a weight."""
    nodes = [helper.make_node("Constant", [], ["eps"], value=numpy_helper.from_array(np.array(1e-5, np.float32))),
             helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(np.ones((2, 2), np.float32))),
             helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "eps"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert list(as_source(model).float_weights()) == ["w"]


def test_float_constants_of_an_initializer_model_stay_constants():
    """Where weights are initializers, a float Constant node is the exporter's own (PyTorch's zero initial
    state of a GRU), not a weight."""
    model = models.build("kws_gru")
    constants = {n.output[0] for n in model.graph.node if n.op_type == "Constant"}
    assert "/rnn/Constant_1_output_0" in constants
    assert not constants & set(as_source(model).float_weights())
