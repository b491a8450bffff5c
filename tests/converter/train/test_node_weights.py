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


def _held_in_nodes(model: onnx.ModelProto, form: str) -> onnx.ModelProto:
    """`model` with every float initializer held in nodes instead: a Constant node ("constant"), an Identity of
    one ("identity"), a Cast of a float64 Constant ("cast", rounding back to the same float32 values)."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    nodes = []
    for init in g.initializer:
        array = numpy_helper.to_array(init)
        if form == "cast":
            nodes += [helper.make_node("Constant", [], [f"{init.name}/f64"],
                                       value=numpy_helper.from_array(array.astype(np.float64))),
                      helper.make_node("Cast", [f"{init.name}/f64"], [init.name], to=onnx.TensorProto.FLOAT)]
        elif form == "identity":
            nodes += [helper.make_node("Constant", [], [f"{init.name}/c"], value=numpy_helper.from_array(array)),
                      helper.make_node("Identity", [f"{init.name}/c"], [init.name])]
        else:
            nodes.append(helper.make_node("Constant", [], [init.name], value=numpy_helper.from_array(array)))
    held = [n for n in g.input if n.name not in {i.name for i in g.initializer}]
    del g.initializer[:]
    del g.input[:]
    g.input.extend(held)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    return copy


def _quantized_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """`model` with each float initializer stored as int8 per tensor and read through a DequantizeLinear; the
    reference keeps the dequantized values as float initializers."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    g = copy.graph
    nodes, kept = [], []
    for init in g.initializer:
        array = numpy_helper.to_array(init)
        scale = np.float32(max(float(np.abs(array).max()), 1e-8) / 127)
        q = np.clip(np.rint(array / scale), -127, 127).astype(np.int8)
        kept += [numpy_helper.from_array(q, f"{init.name}/q"), numpy_helper.from_array(np.array(scale), f"{init.name}/s")]
        nodes.append(helper.make_node("DequantizeLinear", [f"{init.name}/q", f"{init.name}/s"], [init.name]))
    del g.initializer[:]
    g.initializer.extend(kept)
    rest = list(g.node)
    del g.node[:]
    g.node.extend(nodes + rest)
    return copy


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
