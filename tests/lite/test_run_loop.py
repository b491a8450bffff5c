"""The plain run loop (`ExecutionPlan.calls`): a reshape planned into its input's memory is not called at all, one
that must copy is, and both give onnxruntime's outputs."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from tests.util import run_lite, run_ort


def _model(reshape_input: str):
    """x [2, 6] -> Relu -> Reshape [3, 4] -> Sigmoid, the Reshape reading `reshape_input` ("relu" or "x")."""
    nodes = [helper.make_node("Relu", ["x"], ["relu"]),
             helper.make_node("Reshape", [reshape_input, "shape"], ["reshaped"]),
             helper.make_node("Sigmoid", ["reshaped"], ["out"])]
    outputs = ["out"] if reshape_input == "relu" else ["out", "relu"]
    graph = helper.make_graph(nodes, "reshape", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              [numpy_helper.from_array(np.array([3, 4], np.int64), "shape")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _session(model) -> lite.LiteSession:
    buf = to_bytes(to_graph(model, disabled_passes=["remove_identity"]))
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def _check(model, session: lite.LiteSession) -> None:
    x = np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32)
    got, want = run_lite(session, {"x": x}), run_ort(model, {"x": x})
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-6)


def test_a_reshape_into_its_inputs_memory_is_skipped() -> None:
    model = _model("relu")
    session = _session(model)
    plan = session._plan
    ops = [plan.steps[k].node.op for k, *_ in plan.calls]
    assert "Reshape" in [s.node.op for s in plan.steps] and "Reshape" not in ops
    _check(model, session)


def test_a_reshape_that_copies_runs() -> None:
    """The graph input stays readable after the Reshape, so the Reshape cannot take its memory: it copies."""
    model = _model("x")
    session = _session(model)
    plan = session._plan
    assert "Reshape" in [plan.steps[k].node.op for k, *_ in plan.calls]
    _check(model, session)
