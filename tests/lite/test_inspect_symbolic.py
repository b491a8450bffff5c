"""`lite.inspect` shows a graph input's unknown dims by their ONNX dim_param names and `?` for unnamed ones; the
names travel in the optional `Tensor.dim_names` field, which a file without symbolic dims does not carry."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

import lite
from converter import convert
from lite.inspect import format_summary, summarize
from schema import fb


def relu_model(dims: list[int | str]) -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def input_line(buf: bytes) -> str:
    lines = format_summary(summarize(lite.Model.Import(buf))).splitlines()
    return lines[lines.index("inputs:") + 1]


def test_symbolic_dims_are_shown_by_name():
    model = relu_model(["batch", 3, "height", "width"])
    model.graph.input[0].type.tensor_type.shape.dim.add()      # a dim with neither value nor name
    assert input_line(convert(model)).split(None, 2)[2] == "[batch, 3, height, width, ?]"


def test_dims_fixed_by_input_shape_lose_their_names():
    buf = convert(relu_model(["batch", 3]), input_shapes={"x": [2, 3]})
    assert input_line(buf).split(None, 2)[2] == "[2, 3]"


def test_a_file_without_symbolic_dims_carries_no_dim_names():
    buf = convert(relu_model([1, 3]))
    root = fb.MetaGraph.GetRootAs(buf, 0)
    assert all(root.AllTensors(i).DimNamesIsNone() for i in range(root.AllTensorsLength()))
    assert lite.Model.Import(convert(relu_model(["n", 3]))).tensors[0].dim_names == ("n", "")


def test_named_dims_still_run_at_any_size():
    buf = convert(relu_model(["batch", 3]))
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    x = np.array([[-1.0, 0.5, 2.0]] * 4, np.float32)
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    np.testing.assert_array_equal(session.GetOutputByTensorName("y").numpy(), np.maximum(x, 0))
