"""A model whose inputs have unknown dims (as Paddle, YOLO and text exporters write them: `[-1, 3, -1, -1]`) converts
without --inputShape and runs at any size, as onnxruntime does: the dims are fixed by Resize or by the first
set_data of a new size; a size seen before reuses its plan."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
import lite.session
from converter import convert
from lite.status import InputTensorError
from tests.util import run_ort


def pooled_model() -> onnx.ModelProto:
    """Conv -> Relu -> MaxPool 2x2 on x [N, 3, H, W]: compiling it with the unknown dims as 1 cannot work (the
    pooling window does not fit)."""
    rng = np.random.default_rng(0)
    initializers = [numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
                    numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "pooled", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                              ["N", 3, "H", "W"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def plans(monkeypatch) -> list[object]:
    """The plans the sessions compile, as they are made."""
    made = []
    compile_graph = lite.session.compile_graph

    def counted(*args, **kwargs):
        plan = compile_graph(*args, **kwargs)
        made.append(plan)
        return plan
    monkeypatch.setattr(lite.session, "compile_graph", counted)
    return made


def test_set_data_of_each_size_runs_it_and_a_size_seen_before_is_not_replanned(plans):
    model = pooled_model()
    buf = convert(model)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    (x,) = session.GetInputs()
    with pytest.raises(InputTensorError, match="'x'.*unknown"):
        session.RunGraph()
    rng = np.random.default_rng(1)
    for shape in [(1, 3, 48, 192), (2, 3, 16, 16), (1, 3, 30, 44), (1, 3, 48, 192)]:
        data = rng.standard_normal(shape).astype(np.float32)
        session.GetInputs()[0].set_data(data)
        session.RunGraph()
        got = session.GetOutputByTensorName("y").numpy()
        want = run_ort(model, {"x": data})["y"]
        assert got.shape == want.shape
        assert np.abs(got - want).max() <= 1e-5
    assert len(plans) == 3


def test_resize_fixes_the_dims_and_known_dims_stay_fixed():
    buf = convert(pooled_model())
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    session.Resize(session.GetInputs(), [[1, 3, 8, 10]])
    assert session.GetOutputByTensorName("y").shape() == [1, 4, 4, 5]
    with pytest.raises(InputTensorError, match="'x'"):
        session.GetInputs()[0].set_data(np.zeros((1, 4, 8, 10), np.float32))     # 3 channels, known


def test_benchmark_input_shapes_resize_before_compiling(tmp_path):
    from lite.tools import benchmark
    path = tmp_path / "pooled.ms"
    path.write_bytes(bytes(convert(pooled_model())))
    assert benchmark.main([f"--modelFile={path}", "--inputShapes=1,3,48,192", "--loopCount=1",
                           "--warmUpLoopCount=0"]) == 0


@pytest.mark.parametrize("name", ["tiny_yolo", "tiny_unet"])
def test_zoo_model_with_symbolic_batch_height_and_width_runs_at_three_sizes(name, plans):
    import models
    model = models.build(name)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    for k, param in ((0, "N"), (2, "H"), (3, "W")):
        dims[k].ClearField("dim_value")
        dims[k].dim_param = param
    for output in model.graph.output:
        output.type.tensor_type.ClearField("shape")
    buf = convert(model)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    before = len(plans)
    for shape in [(1, 3, 64, 96), (2, 3, 96, 64), (1, 3, 128, 128), (1, 3, 64, 96)]:
        data = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        session.GetInputs()[0].set_data(data)
        session.RunGraph()
        want = run_ort(model, {model.graph.input[0].name: data})
        for key, expected in want.items():
            got = session.GetOutputByTensorName(key).numpy()
            assert got.shape == expected.shape
            assert np.abs(got - expected).max() <= 1e-5 * max(float(np.abs(expected).max()), 1.0), key
    assert len(plans) - before == 3
