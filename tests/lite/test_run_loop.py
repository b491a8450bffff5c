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


def test_one_call_kernels_run_as_that_call_on_every_run() -> None:
    """Slice, Gather of one index, Transpose, a copying Unsqueeze, Abs, Sqrt and Sigmoid (numpy's, also beside the
    compiled kernels) run as their single numpy call on views fixed at bind (no kernel method around it); each run
    reads its new input through those views."""
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["sliced"]),
             helper.make_node("Gather", ["sliced", "index"], ["row"], axis=1),
             helper.make_node("Transpose", ["sliced"], ["moved"], perm=[1, 0, 2]),
             helper.make_node("Unsqueeze", ["x", "axis0"], ["lifted"]),
             helper.make_node("Abs", ["row"], ["positive"]),
             helper.make_node("Sqrt", ["positive"], ["root"]),
             helper.make_node("Sigmoid", ["moved"], ["gate"])]
    consts = {"starts": [1], "ends": [3], "axes": [1], "index": 1, "axis0": [0]}
    outputs = ["root", "gate", "lifted"]
    graph = helper.make_graph(nodes, "direct", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 3])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    session = _session(model)
    plan = session._plan
    direct = {plan.steps[k].node.op for k, call, *_ in plan.calls if getattr(call, "__self__", None)
              is not plan.steps[k].kernel}
    assert {"Slice", "Gather", "Transpose", "Unsqueeze", "Abs", "Sqrt", "Activation"} <= direct
    rng = np.random.default_rng(3)
    for _ in range(2):
        x = rng.standard_normal((2, 4, 3)).astype(np.float32)
        got, want = run_lite(session, {"x": x}), run_ort(model, {"x": x})
        for name, expected in want.items():
            np.testing.assert_allclose(got[name], expected, rtol=1e-6, err_msg=name)


def test_a_subclass_that_runs_otherwise_keeps_its_run() -> None:
    """`direct` stands for the `run` of the class defining both: a subclass overriding `run` alone is called
    through its own `run`."""
    from lite.kernel import Kernel
    from lite.model import NodeDef

    class Copy(Kernel):
        def infer(self, inputs):
            return list(inputs)

        def run(self, inputs, outputs):
            np.copyto(outputs[0], inputs[0])

        def direct(self, inputs, outputs):
            return np.copyto, outputs[0], inputs[0]

    class Negate(Copy):
        def run(self, inputs, outputs):
            np.negative(inputs[0], out=outputs[0])

    node = NodeDef("n", "Copy", None, [0], [1])
    x, out = np.ones(3, np.float32), np.zeros(3, np.float32)
    assert Copy(node).plain_call([x], [out])[0] is np.copyto
    call, a, b = Negate(node).plain_call([x], [out])
    call(a, b)
    np.testing.assert_array_equal(out, -x)
