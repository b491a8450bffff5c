"""The compiled GELU (lite/kernels/compiled/gelu.py) against math.erf in float64 and the numpy kernel, in a session
(not in place, so the pass vectorises) and alone."""
from __future__ import annotations

import importlib.util
import math

import numpy as np
import pytest
from onnx import TensorProto, helper

import lite
from converter import convert
from lite.kernels.activation import gelu

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


def values() -> np.ndarray:
    x = np.random.default_rng(0).normal(0, 3, 20_001).astype(np.float32)
    edges = [0.0, -0.0, 0.84375, -0.84375, np.nextafter(np.float32(0.84375), np.float32(0)), 5.6568542, -5.6568542,
             30.0, -30.0, 1e-30, -1e-30]
    return np.concatenate([np.array(edges, np.float32), x])


def test_compiled_gelu_matches_the_exact_function_and_the_numpy_kernel():
    from lite.kernels.compiled import gelu as compiled, numba_module
    numba_module()
    x = values()
    out = np.empty_like(x)
    compiled.gelu.bind(len(x), x, out)()
    exact = np.array([v * (1 + math.erf(v / math.sqrt(2))) / 2 for v in x.astype(np.float64)])
    assert np.abs(out - exact).max() <= 1e-6 * max(1.0, np.abs(exact).max()) + 5e-7
    reference = np.empty_like(x)
    gelu(x, reference)
    np.testing.assert_allclose(out, reference, rtol=3e-7, atol=3e-7)


def test_a_session_runs_gelu_compiled_and_not_in_place():
    x = values().reshape(4, -1)
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    buf = convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    outputs = {}
    for kernels in ("numpy", "compiled"):
        s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels=kernels))
        s.GetInputs()[0].set_data(x)
        s.RunGraph()
        outputs[kernels] = s.GetOutputs()["y"].numpy().copy()
        np.testing.assert_array_equal(s.GetInputs()[0].numpy(), x)
    assert [st.kernel.compiled for st in s._plan.steps] == [True]
    np.testing.assert_allclose(outputs["compiled"], outputs["numpy"], rtol=3e-7, atol=3e-7)


def test_compiled_tanh_gelu_matches_float64_and_onnxruntime_in_a_session():
    """GELU_TANH compiled as x sigmoid(2u): against the float64 formula (huge |x|, where x^3 overflows float32,
    included) and onnxruntime's opset-20 Gelu(approximate='tanh')."""
    from lite.kernels.compiled import gelu as compiled, numba_module
    from tests.util import run_ort
    numba_module()
    x = np.concatenate([values(), np.array([3e38, -3e38, -1e10, 1e10], np.float32)])
    out = np.empty_like(x)
    compiled.gelu_tanh.bind(len(x), x, out)()
    v = x.astype(np.float64)
    with np.errstate(over="ignore"):
        exact = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    assert np.abs(out - exact).max() <= 1e-6 * np.abs(exact).max() + 5e-7
    assert (np.abs(out - exact) <= 3e-6 * np.abs(exact) + 1e-6).all()
    x = values().reshape(4, -1)
    graph = helper.make_graph([helper.make_node("Gelu", ["x"], ["y"], approximate="tanh")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    buf = convert(model)
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels="compiled"))
    s.GetInputs()[0].set_data(x)
    s.RunGraph()
    assert [st.kernel.compiled for st in s._plan.steps] == [True]
    # onnxruntime's own tanh GELU is off by up to ~5e-7 absolutely near 0 (its sign flips there)
    np.testing.assert_allclose(s.GetOutputs()["y"].numpy(), run_ort(model, {"x": x})["y"], rtol=1e-6, atol=1e-6)
