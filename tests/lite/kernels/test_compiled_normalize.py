"""The compiled Softmax and LayerNorm (lite/kernels/compiled/normalize.py) against onnxruntime and the numpy
kernels, each in a session."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from tests.util import run_ort

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")
RNG = np.random.default_rng(0)


def outputs(model, x: np.ndarray) -> dict[str, tuple[np.ndarray, list[bool]]]:
    buf = convert(model)
    result = {}
    for kernels in ("numpy", "compiled"):
        s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels=kernels, thread_num=2))
        s.GetInputs()[0].set_data(x)
        s.RunGraph()
        np.testing.assert_array_equal(s.GetInputs()[0].numpy(), x)          # not overwritten in place
        result[kernels] = (s.GetOutputs()["y"].numpy().copy(), [st.kernel.compiled for st in s._plan.steps])
    return result


def softmax_model(shape: tuple[int, ...]):
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_softmax_rows_match_onnxruntime():
    x = (RNG.normal(0, 4, (3, 5, 67)) - 40).astype(np.float32)
    x[0, 0, :] = -1e4                        # a row of equal large negatives
    x[1, 2, 7] = 90.0                        # one dominant entry: the others' exps underflow
    model = softmax_model(x.shape)
    result = outputs(model, x)
    assert result["compiled"][1] == [True]
    expected = run_ort(model, {"x": x})["y"]
    np.testing.assert_allclose(result["compiled"][0], expected, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(result["compiled"][0], result["numpy"][0], rtol=2e-6, atol=1e-7)


def test_softmax_rows_of_nan_and_infinities_match_onnxruntime():
    """A fully masked row (all -inf), a row with +inf and a row with a NaN are NaN rows, never a crash."""
    x = RNG.normal(0, 1, (5, 33)).astype(np.float32)
    x[0, :] = -np.inf
    x[1, 4] = np.inf
    x[2, 30] = np.nan
    x[3, ::2] = -np.inf                      # partly masked: the masked entries are 0
    model = softmax_model(x.shape)
    result = outputs(model, x)
    assert result["compiled"][1] == [True]
    expected = run_ort(model, {"x": x})["y"]
    assert np.isnan(expected[:3]).all()
    np.testing.assert_allclose(result["compiled"][0], expected, rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(result["compiled"][0], result["numpy"][0], rtol=2e-6, atol=1e-7)


def test_layer_norm_rows_match_onnxruntime():
    x = (RNG.normal(3, 2, (4, 9, 96))).astype(np.float32)
    scale, bias = RNG.normal(1, 0.2, 96).astype(np.float32), RNG.normal(0, 0.3, 96).astype(np.float32)
    graph = helper.make_graph([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], epsilon=1e-5)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
                              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(bias, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    result = outputs(model, x)
    assert result["compiled"][1] == [True]
    expected = run_ort(model, {"x": x})["y"]
    np.testing.assert_allclose(result["compiled"][0], expected, rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(result["compiled"][0], result["numpy"][0], rtol=1e-5, atol=2e-6)
