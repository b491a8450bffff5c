"""Full quantization of the ops between a transformer's products: an attention-style masked Softmax (its input
range fitted to the int8 kernel, or left float when too wide) and LayerNorm (scale and bias kept float), against
onnxruntime's float model."""
from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from converter.quant.config import MINDSPORE_LITE
from tests.converter.quant.test_quantization import run_buf
from tests.util import run_ort

RNG = np.random.default_rng(46)
ROWS, COLS = 6, 10


def masked_softmax(gain: float) -> onnx.ModelProto:
    """scores [1, ROWS, COLS] * gain + mask (0, or -10000 on the last 3 columns) -> Softmax -> LayerNorm."""
    mask = np.zeros((1, 1, COLS), np.float32)
    mask[..., -3:] = -10000
    inits = [numpy_helper.from_array(np.float32(gain), "gain"), numpy_helper.from_array(mask, "mask"),
             numpy_helper.from_array(RNG.normal(1, 0.2, COLS).astype(np.float32), "gamma"),
             numpy_helper.from_array(RNG.normal(0, 0.2, COLS).astype(np.float32), "beta")]
    nodes = [helper.make_node("Mul", ["x", "gain"], ["scaled"]), helper.make_node("Add", ["scaled", "mask"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("LayerNormalization", ["p", "gamma", "beta"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "masked", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [1, ROWS, COLS])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, ROWS, COLS])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def quantized(gain: float):
    samples = [{"x": RNG.normal(0, 1, (1, ROWS, COLS)).astype(np.float32)} for _ in range(8)]
    model = masked_softmax(gain)
    graph = quantize(to_graph(model), QuantConfig(preset=MINDSPORE_LITE), samples)
    dtypes = {n.op: str(graph.values[n.outputs[0]].dtype) for n in graph.nodes if n.op != "QuantDTypeCast"}
    error = max(np.abs(run_buf(to_bytes(graph), s)["y"] - run_ort(model, s)["y"]).max() for s in samples[:3])
    return dtypes, error, graph


def test_masked_softmax_runs_int8_with_its_range_fitted_below_the_row_maxima():
    dtypes, error, graph = quantized(2.0)
    assert dtypes["Softmax"] == dtypes["LayerNorm"] == "int8"
    softmax = next(n for n in graph.nodes if n.op == "Softmax")
    p = graph.values[softmax.inputs[0]].quant_params[0]
    assert p.min > -40 and p.scale <= 0.125                  # the mask's -10000 did not stretch the scale
    assert error < 0.1                                       # LayerNorm's output spans about 6


def test_too_wide_scores_leave_the_softmax_and_its_input_float():
    dtypes, _, _ = quantized(40.0)                           # rows of scores spanning ~300: no 8-bit step fits
    assert dtypes["Softmax"] == dtypes["Add"] == "float32" and dtypes["LayerNorm"] == "int8"


def test_layer_norm_keeps_float_scale_and_bias():
    _, _, graph = quantized(2.0)
    norm = next(n for n in graph.nodes if n.op == "LayerNorm")
    assert [str(graph.values[i].dtype) for i in norm.inputs] == ["int8", "float32", "float32"]
