"""Tensors as real-world files store them: 0-element constants with an empty buffer (onnx-tf's reshape to a
scalar), and tensors of types the runtime holds no array of (RESOURCE, STRING, VARIANT), which the reader accepts
and the importer refuses naming the op and the node."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
from converter import convert_tflite  # noqa: E402
from converter.frontends import frontend  # noqa: E402
from converter.frontends.tflite.reader import read_model  # noqa: E402
from lite.status import NotSupportedError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel  # noqa: E402
from tests.tflite_models import check, rand, run_ours  # noqa: E402


def _squeeze_to_scalar() -> tuple[bytes, list[np.ndarray]]:
    """x (1, 1) -> RESHAPE by the 0-element constant shape [] (empty buffer) -> a scalar, plus 1."""
    m = WildModel()
    x = m.tensor((1, 1), name="x")
    shape = m.const(np.zeros(0, np.int32), name="Squeeze/shape")
    scalar, y = m.tensor((), name="Squeeze1"), m.tensor((), name="y")
    m.op("RESHAPE", [x, shape], [scalar])
    m.op("ADD", [scalar, m.const(np.float32(1.0), name="one")], [y], "AddOptions")
    return m.build([x], [y]), [rand(1, 1)]


def test_zero_element_constant_is_an_empty_constant():
    data, feeds = _squeeze_to_scalar()
    shape = next(t for t in read_model(data).tensors if t.name == "Squeeze/shape")
    assert shape.data is not None and shape.data.shape == (0,) and shape.data.dtype == np.int32
    (y,) = check(data, feeds)
    assert y.shape == ()


@pytest.mark.parametrize("flag", [True, False])
def test_zero_element_constant_inside_if_branches(flag):
    """IF c: squeeze x [1, 1] to a scalar by the empty shape [] and add 1, else subtract 1, in both branches."""
    m = WildModel()

    def branch(op: str):
        def build(g: WildModel) -> tuple[list[int], list[int]]:
            x, scalar, y = g.tensor((1, 1), name="x"), g.tensor((), name="Squeeze1"), g.tensor((), name="y")
            g.op("RESHAPE", [x, g.const(np.zeros(0, np.int32), name="Squeeze/shape")], [scalar])
            g.op(op, [scalar, g.const(np.float32(1.0))], [y], f"{op.capitalize()}Options")
            return [x], [y]
        return build
    c, x, y = m.tensor((), np.bool_, name="c"), m.tensor((1, 1), name="x"), m.tensor((), name="y")
    m.op("IF", [c, x], [y], "IfOptions", ThenSubgraphIndex=m.subgraph(branch("ADD")),
         ElseSubgraphIndex=m.subgraph(branch("SUB")))
    (out,) = check(m.build([c, x], [y]), [np.array(flag), rand(1, 1)])
    assert out.shape == ()


def test_zero_element_activation_stays_a_runtime_tensor():
    """An activation of a static 0-element shape also has an empty buffer: the operator writing it wins (LiteRT
    cannot hand out a 0-element output, so the expected value is the empty array itself)."""
    m = WildModel()
    x = m.tensor((2, 0), name="x")
    y = m.tensor((2, 0), name="y")
    m.buffers.append(np.zeros(0, np.uint8))
    m.tensors[y]["buffer"] = len(m.buffers) - 1
    m.op("RELU", [x], [y])
    data = m.build([x], [y])
    assert next(t for t in read_model(data).tensors if t.name == "y").data is not None
    (out,) = run_ours(data, [np.zeros((2, 0), np.float32)])
    assert out.shape == (2, 0) and out.dtype == np.float32


def test_zero_element_graph_input_stays_an_input():
    m = WildModel()
    x, y = m.tensor((0, 3), name="x"), m.tensor((0, 3), name="y")
    m.buffers.append(np.zeros(0, np.uint8))
    m.tensors[x]["buffer"] = len(m.buffers) - 1
    m.op("RELU", [x], [y])
    graph = frontend("TFLITE").load(m.build([x], [y])).to_ir()
    assert graph.inputs == ["x"] and graph.values["x"].const is None and [n.op for n in graph.nodes] == ["Activation"]


@pytest.mark.parametrize("type_name", ["RESOURCE", "STRING", "VARIANT", "COMPLEX64", "INT4"])
def test_every_schema_type_is_read(type_name):
    m = WildModel()
    x = m.tensor((2,), name="x")
    m.typed([1], type_name, "odd")
    y = m.tensor((2,), name="y")
    m.op("RELU", [x], [y])
    record = read_model(m.build([x], [y]))
    odd = next(t for t in record.tensors if t.name == "odd")
    assert odd.opaque and odd.type_name == type_name and odd.data is None


def test_op_on_an_opaque_tensor_is_refused_naming_op_node_and_tensor():
    m = WildModel()
    s = m.typed([2], "STRING", "words", data=np.array([2, 16, 17, 18], "<i4").tobytes() + b"ab")
    y = m.typed([1, 2], "STRING", "reshaped")
    m.op("RESHAPE", [s, m.const(np.array([1, 2], np.int32))], [y])
    with pytest.raises(NotSupportedError, match=r"TFLite op 'RESHAPE' at node 'reshaped' \(operator 0\): tensor "
                                                r"'words' has type STRING"):
        convert_tflite(m.build([], [y]))


def test_opaque_graph_input_is_refused_naming_it():
    m = WildModel()
    s = m.typed([1], "STRING", "text")
    y = m.typed([1], "STRING", "same")
    m.op("RESHAPE", [s, m.const(np.array([1], np.int32))], [y])
    with pytest.raises(NotSupportedError, match="graph input 'text' has type STRING"):
        convert_tflite(m.build([s], [y]))

