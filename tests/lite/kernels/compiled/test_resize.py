"""The compiled Resize (both spatial axes of an NHWC image in one pass) against onnx.reference, in every mode
whose taps it takes, and the numpy kernel's path where it does not apply."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import lite
from converter import convert
from tests.util import run_lite

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")

SHAPE = (2, 9, 7, 16)        # NHWC: the resized axes are 1 and 2, as the converter lays out an image


def _model(consts: dict[str, np.ndarray], shape: tuple[int, ...] = SHAPE, **attrs) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", *consts], ["y"], **attrs)
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in consts.items() if n])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _run(model: onnx.ModelProto, x: np.ndarray) -> tuple[np.ndarray, bool]:
    """Our output and whether the compiled sibling ran it."""
    data = convert(model)
    session = lite.LiteSession.CreateSession(data, len(data), lite.Context(thread_num=2, kernels="compiled"))
    y = run_lite(session, {"x": x})["y"]
    return y, any(step.kernel.compiled for step in session._plan.steps)


@pytest.mark.parametrize("mode,transform,scales,antialias", [
    ("linear", "half_pixel", (2.0, 2.0), 0),
    ("linear", "align_corners", (1.6, 0.6), 0),
    ("linear", "asymmetric", (1.0, 2.5), 0),
    ("nearest", "asymmetric", (2.0, 3.0), 0),
    ("nearest", "half_pixel", (0.5, 1.5), 0),
    ("cubic", "half_pixel", (1.5, 2.0), 0),
    ("linear", "half_pixel", (0.4, 0.6), 1),
])
def test_compiled_resize_matches_the_onnx_reference(mode: str, transform: str, scales: tuple[float, float],
                                                    antialias: int) -> None:
    model = _model({"": None, "scales": np.array([1, *scales, 1], np.float32)}, mode=mode,
                   coordinate_transformation_mode=transform, antialias=antialias)
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    got, compiled = _run(model, x)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert compiled
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_an_upsampling_large_enough_for_two_threads_matches_the_onnx_reference() -> None:
    """MediaPipe's 32x32x16 -> 64x64x16 bilinear: above the threading threshold, split over output rows."""
    shape = (1, 32, 32, 16)
    model = _model({"": None, "scales": np.array([1, 2, 2, 1], np.float32)}, shape, mode="linear",
                   coordinate_transformation_mode="half_pixel")
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got, compiled = _run(model, x)
    assert compiled
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_crop_and_resize_keeps_the_numpy_path() -> None:
    """tf_crop_and_resize writes the extrapolation value outside the input: not the compiled pass's job."""
    model = _model({"roi": np.array([0, -0.2, 0.3, 0, 1, 0.7, 1.4, 1], np.float32), "": None,
                    "sizes": np.array([2, 6, 5, 16], np.int64)}, mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.5)
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    got, compiled = _run(model, x)
    assert not compiled
    np.testing.assert_allclose(got, ReferenceEvaluator(model).run(None, {"x": x})[0], rtol=1e-5, atol=1e-5)
