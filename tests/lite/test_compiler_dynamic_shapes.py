"""Shapes known only at run time: parameters fed as graph inputs, data-dependent output sizes, the run-time
pool, and the failures they can meet. onnxruntime is the oracle."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from tests.util import run_lite, run_ort, session_for, small_cnn


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[str],
           inits: list[onnx.TensorProto] = (), opset: int = 13) -> onnx.ModelProto:
    """A model whose outputs are float tensors of shapes left to inference."""
    graph = helper.make_graph(nodes, "dynamic", inputs,
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
                              list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _i64(name: str, *values: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _params_from_input() -> onnx.ModelProto:
    """Resize sizes, Slice bounds and a Reshape target all computed from the second input `n` ([1] int64):
    x [1, 2, 4, 5] -> Resize to [1, 2, n+1, n+2] -> Slice axis 3 to [:n] -> Reshape to [-1, n] -> Relu."""
    nodes = [
        helper.make_node("Add", ["n", "one"], ["n1"]),
        helper.make_node("Add", ["n", "two"], ["n2"]),
        helper.make_node("Concat", ["batch_channels", "n1", "n2"], ["sizes"], axis=0),
        helper.make_node("Resize", ["x", "", "", "sizes"], ["r"], name="resize", mode="linear"),
        helper.make_node("Slice", ["r", "zero", "n", "three"], ["s"], name="slice"),
        helper.make_node("Concat", ["minus_one", "n"], ["target"], axis=0),
        helper.make_node("Reshape", ["s", "target"], ["flat"], name="reshape"),
        helper.make_node("Relu", ["flat"], ["y"], name="relu"),
        helper.make_node("Sigmoid", ["x"], ["static_y"], name="sigmoid"),
    ]
    inits = [_i64("one", 1), _i64("two", 2), _i64("zero", 0), _i64("three", 3), _i64("minus_one", -1),
             _i64("batch_channels", 1, 2)]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, "h", "w"]),
                          helper.make_tensor_value_info("n", TensorProto.INT64, [1])], ["y", "static_y"], inits)


def test_static_model_plan_and_steps_unchanged() -> None:
    """A fully static model compiles to the very plan it had before run-time shapes existed (on the reference
    kernels: compiled pooling needs no padding scratch, so its plan is smaller), except that the second conv,
    which multiplies its packed constant weight directly, needs no transposed product buffer."""
    buf = convert(small_cnn(batch=2))
    plan = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, kernels="numpy"))._plan
    assert plan.dynamic is None
    assert [s.node.op for s in plan.steps] == ["Transpose", "Conv2D", "Pooling", "Conv2D", "Pooling", "Reshape",
                                               "Flatten", "FullConnection", "Softmax"]
    assert plan.arena_bytes == 22400
    assert [(p.offset, p.size, p.first, p.last) for p in plan.placements] == [
        (19328, 1536, 0, 9), (20864, 1536, 0, 1), (13824, 3072, 1, 2), (9664, 768, 2, 3), (8640, 1024, 3, 4),
        (0, 64, 4, 7), (64, 32, 7, 9), (0, 32, 8, 9), (16896, 2400, 1, 1), (0, 13824, 1, 1), (0, 1536, 2, 2),
        (6912, 1728, 3, 3), (0, 6912, 3, 3)]


def test_parameters_from_a_graph_input_match_onnxruntime_over_runs() -> None:
    model = _params_from_input()
    session = session_for(model)
    nodes = [n.name for n in session._plan.dynamic.nodes]
    assert "resize" in nodes and "reshape" in nodes and "sigmoid" not in nodes
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 5)).astype(np.float32)
    for n in (2, 5, 3, 3, 7):
        feeds = {"x": x, "n": np.array([n], np.int64)}
        ours, expected = run_lite(session, feeds), run_ort(model, feeds)
        assert session.GetOutputByTensorName("y").shape() == list(expected["y"].shape)
        for name in expected:
            np.testing.assert_allclose(ours[name], expected[name], rtol=1e-5, atol=1e-6)


def test_run_pool_reuses_memory_while_shapes_repeat() -> None:
    session = session_for(_params_from_input(), {"x": [1, 2, 4, 5]})
    pool = session._plan.dynamic.pool
    x = np.ones((1, 2, 4, 5), np.float32)

    def run(n: int) -> None:
        run_lite(session, {"x": x, "n": np.array([n], np.int64)})

    run(3)
    plans, allocations = pool.plans, pool.allocations
    assert plans == 1 and allocations > 0     # the first run allocates, then plans the pool's arena
    run(3)
    run(3)
    assert (pool.plans, pool.allocations) == (plans, allocations)
    out = session.GetOutputByTensorName("y").MutableData()
    assert np.shares_memory(out, pool.arena)
    run(6)                                    # a new shape: one re-plan, the arena grows
    assert pool.plans == plans + 1
    arena_allocations = pool.arena_allocations
    run(6)
    run(2)                                    # smaller: re-planned into the arena it has
    assert pool.plans == plans + 2 and pool.arena_allocations == arena_allocations


def test_callbacks_see_dynamic_nodes_with_their_run_time_shapes() -> None:
    session = session_for(_params_from_input())
    session.GetInputsByTensorName("n").set_data(np.array([4], np.int64))
    seen = {}

    def after(inputs, outputs, param) -> bool:
        seen[param.node_name] = [t.shape() for t in outputs]
        return True

    assert session.RunGraph(None, after) == lite.RET_OK
    assert seen["resize"] == [[1, 2, 5, 6]] and seen["reshape"] == [[10, 4]]
    assert session.RunGraph(None, lambda i, o, p: p.node_name != "slice") == lite.RET_SUCCESS_EXIT


def test_resize_keeps_working_with_a_dynamic_part() -> None:
    model = _params_from_input()
    session = session_for(model)
    x = np.random.default_rng(1).standard_normal((1, 2, 6, 3)).astype(np.float32)
    feeds = {"x": x, "n": np.array([2], np.int64)}
    ours = run_lite(session, feeds)          # Resizes x first
    assert [t.shape() for t in session.GetInputs()] == [[1, 2, 6, 3], [1]]
    np.testing.assert_allclose(ours["y"], run_ort(model, feeds)["y"], rtol=1e-5, atol=1e-6)


def test_data_dependent_output_size_matches_onnxruntime() -> None:
    """The count of positive elements decides how many elements are kept, then gathered by a fixed index."""
    nodes = [
        helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT64),
        helper.make_node("Clip", ["xi", "zero", "one"], ["ones"]),
        helper.make_node("ReduceSum", ["ones", "axes"], ["count"], keepdims=1),
        helper.make_node("Slice", ["x", "zero", "count", "axes"], ["kept"], name="keep"),
        helper.make_node("Gather", ["kept", "index"], ["y"], name="gather", axis=0),
    ]
    inits = [_i64("zero", 0), _i64("one", 1), _i64("axes", 0), _i64("index", 0)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])], ["kept", "y"], inits)
    session = session_for(model)
    for x in ([3, 2, 0, 0, 0, 0], [5, 1, 1, 1, 1, 1], [1, 0, 0, 0, 0, 0], [3, 2, 0, 0, 0, 0]):
        feeds = {"x": np.array(x, np.float32)}
        ours, expected = run_lite(session, feeds), run_ort(model, feeds)
        for name in expected:
            assert ours[name].shape == expected[name].shape
            np.testing.assert_array_equal(ours[name], expected[name])


def test_run_time_shape_over_the_memory_limit_is_memory_failed() -> None:
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["y"], name="fill")]
    model = _model(nodes, [helper.make_tensor_value_info("shape", TensorProto.INT64, [3])], ["y"])
    session = session_for(model)
    session.GetInputs()[0].set_data(np.array([1 << 20, 1 << 20, 1 << 10], np.int64))
    with pytest.raises(lite.MemoryFailedError, match="'fill'") as e:
        session.RunGraph()
    assert e.value.status == lite.RET_MEMORY_FAILED
    session.GetInputs()[0].set_data(np.array([2, 3, 1], np.int64))    # the session stays usable
    session.RunGraph()
    assert session.GetOutputByTensorName("y").shape() == [2, 3, 1]


def test_negative_dimension_at_run_time_is_infer_error_naming_the_node() -> None:
    nodes = [helper.make_node("Reshape", ["x", "target"], ["y"], name="to_target")]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                           helper.make_tensor_value_info("target", TensorProto.INT64, [2])], ["y"])
    session = session_for(model)
    session.GetInputsByTensorName("target").set_data(np.array([-3, -4], np.int64))
    with pytest.raises(lite.InferShapeError, match="'to_target'") as e:
        session.RunGraph()
    assert e.value.status == lite.RET_INFER_ERR


def test_non_max_suppression_then_gather_matches_onnxruntime_over_runs() -> None:
    """How many boxes NonMaxSuppression keeps depends on the scores; the kept boxes are gathered by index."""
    nodes = [
        helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou"], ["selected"], name="nms"),
        helper.make_node("Gather", ["selected", "two"], ["index"], name="pick_index", axis=1),
        helper.make_node("Squeeze", ["boxes", "zero"], ["flat_boxes"]),
        helper.make_node("Gather", ["flat_boxes", "index"], ["kept"], name="gather_boxes", axis=0),
    ]
    inits = [_i64("max_out", 10), numpy_helper.from_array(np.array([0.5], np.float32), "iou"),
             numpy_helper.from_array(np.array(2, np.int64), "two"), _i64("zero", 0)]
    model = _model(nodes, [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, 6, 4]),
                           helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, 1, 6])], ["kept"], inits)
    session = session_for(model)
    rng = np.random.default_rng(2)
    corners = rng.uniform(0, 4, (1, 6, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + rng.uniform(0.5, 3, (1, 6, 2)).astype(np.float32)], axis=2)
    counts = set()
    for seed in range(4):
        feeds = {"boxes": boxes, "scores": np.random.default_rng(seed).uniform(size=(1, 1, 6)).astype(np.float32)}
        if seed == 3:
            feeds["boxes"] = np.tile(boxes[:, :1], (1, 6, 1))       # six equal boxes: one is kept
        ours, expected = run_lite(session, feeds), run_ort(model, feeds)
        assert ours["kept"].shape == expected["kept"].shape
        np.testing.assert_array_equal(ours["kept"], expected["kept"])
        counts.add(expected["kept"].shape[0])
    assert len(counts) > 1


def test_nonzero_then_gather_matches_onnxruntime_over_runs() -> None:
    nodes = [helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
             helper.make_node("Squeeze", ["nz", "zero"], ["index"]),
             helper.make_node("Gather", ["x", "index"], ["y"], name="gather", axis=0)]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])], ["y"], [_i64("zero", 0)])
    session = session_for(model)
    for x in ([0, 2, 0, 3, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0], [0, 2, 0, 3, 0, 0]):
        feeds = {"x": np.array(x, np.float32)}
        ours, expected = run_lite(session, feeds), run_ort(model, feeds)
        assert ours["y"].shape == expected["y"].shape
        np.testing.assert_array_equal(ours["y"], expected["y"])
