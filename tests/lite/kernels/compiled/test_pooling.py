"""The compiled 2x2 max pool (`conv.max_pool_2x2`) against onnxruntime: strides 1 and 2, odd sizes (the last
row and column left out); a NaN in a window gives NaN, as numpy's max (onnxruntime skips it); windows over the
padding stay on the general pass."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import pytest
from onnx import helper

import lite
from converter import convert
from tests.util import run_lite, run_ort

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba not installed")


def _max_pool(stride: int, pads: list[int]) -> onnx.ModelProto:
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[stride, stride], pads=pads)
    graph = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("stride,pads,shape", [(2, [0] * 4, (2, 24, 9, 11)), (1, [0] * 4, (1, 16, 6, 7)),
                                               (2, [1, 1, 1, 1], (1, 16, 6, 7))])
def test_compiled_2x2_max_pool_matches_onnxruntime(stride: int, pads: list[int], shape: tuple[int, ...]) -> None:
    from lite.kernels.compiled import conv
    model = _max_pool(stride, pads)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    data = convert(model, {"x": list(shape)})
    conv.max_pool_2x2.forms.clear()
    session = lite.LiteSession.CreateSession(data, len(data), lite.Context(thread_num=2, kernels="compiled"))
    np.testing.assert_array_equal(run_lite(session, {"x": x})["y"], run_ort(model, {"x": x})["y"])
    x[0, 3, 2, 4] = np.nan
    got = run_lite(session, {"x": x})["y"]
    top = pads[0]          # the output pixels whose windows hold x[0, 3, 2, 4]
    rows = [i for i in range(got.shape[2]) if 0 <= 2 + top - stride * i < 2]
    cols = [j for j in range(got.shape[3]) if 0 <= 4 + top - stride * j < 2]
    expected = np.zeros(got.shape, bool)
    expected[0, 3, rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1] = True
    np.testing.assert_array_equal(np.isnan(got), expected)
    inside = not any(pads)
    assert bool(conv.max_pool_2x2.forms) == inside or _served_ahead_of_time()


def _served_ahead_of_time() -> bool:
    aot = importlib.import_module("lite.kernels.compiled.aot")
    return aot.serving() is not None
