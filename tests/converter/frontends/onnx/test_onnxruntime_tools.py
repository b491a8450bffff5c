"""Models as onnxruntime's own tools rewrite them — `quantize_dynamic`, `quantize_static` (QDQ and QOperator) and
the transformers `optimize_model` — convert and match onnxruntime running the same file.

A statically quantized output matches within one quantum of its DequantizeLinear; dynamically quantized models
(float outputs, each activation quantized by its own run-time range) within 2e-4 of the output range.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from models.text import text_encoder
from tests.util import run_lite, run_ort, session_for

quantization = pytest.importorskip("onnxruntime.quantization", reason="onnxruntime's own quantizer writes the models under test")
FORMS = ("dynamic", "qdq", "qoperator")


def _feeds(model: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Inputs for every graph input: token ids below 60 for integer inputs, normal floats otherwise."""
    initialized = {i.name for i in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in initialized:
            continue
        shape = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        feeds[vi.name] = (rng.integers(0, 60, shape) if np.issubdtype(dtype, np.integer)
                          else rng.standard_normal(shape)).astype(dtype)
    return feeds


class _Calibration(quantization.CalibrationDataReader):
    def __init__(self, model: onnx.ModelProto):
        rng = np.random.default_rng(1)
        self.items = iter([_feeds(model, rng) for _ in range(8)])

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.items, None)


def quantized(model: onnx.ModelProto, form: str, tmp_path: Path, **options) -> onnx.ModelProto:
    """`model` as onnxruntime's quantizer writes it in `form` (int8 weights per channel; QOperator with uint8
    activations, QDQ with int8, "qdq16" with uint16 through onnxruntime's own Q / DQ ops)."""
    source, target = tmp_path / "float.onnx", tmp_path / f"{form}.onnx"
    onnx.save(model, source)
    if form == "dynamic":
        quantization.quantize_dynamic(source, target, weight_type=quantization.QuantType.QInt8, **options)
    elif form == "qdq16":
        quantization.quantize_static(source, target, _Calibration(model), per_channel=True,
                                     quant_format=quantization.QuantFormat.QDQ,
                                     activation_type=quantization.QuantType.QUInt16,
                                     weight_type=quantization.QuantType.QInt8,
                                     extra_options={"UseQDQContribOps": True})
    else:
        activations = quantization.QuantType.QUInt8 if form == "qoperator" else quantization.QuantType.QInt8
        quantization.quantize_static(source, target, _Calibration(model), per_channel=True,
                                     quant_format=quantization.QuantFormat.QOperator if form == "qoperator"
                                     else quantization.QuantFormat.QDQ,
                                     activation_type=activations, weight_type=quantization.QuantType.QInt8)
    return onnx.load(target)


def output_quantum(model: onnx.ModelProto, output: str) -> float | None:
    """The scale of the DequantizeLinear writing `output`, None when a float op writes it."""
    node = next(n for n in model.graph.node if output in n.output)
    if node.op_type != "DequantizeLinear":
        return None
    scale = next(i for i in model.graph.initializer if i.name == node.input[1])
    return float(numpy_helper.to_array(scale))


def assert_matches_onnxruntime(model: onnx.ModelProto) -> None:
    feeds = _feeds(model, np.random.default_rng(5))
    want, got = run_ort(model, feeds), run_lite(session_for(model), feeds)
    for name, expected in want.items():
        error = float(np.abs(got[name].astype(np.float64) - expected).max())
        quantum = output_quantum(model, name)
        largest = float(np.abs(expected).max())
        # one quantum, give or take the float32 rounding of the two dequantized values
        bound = quantum + 4 * float(np.spacing(np.float32(largest))) if quantum else 2e-4 * largest
        assert error <= bound, (name, error, bound)


def lstm_model(seed: int = 0, steps: int = 7, batch: int = 2, size: int = 12, hidden: int = 16
               ) -> onnx.ModelProto:
    """An LSTM whose weights are initializers, as onnxruntime's dynamic quantizer needs to make a
    DynamicQuantizeLSTM of it, then a linear head."""
    rng = np.random.default_rng(seed)
    weights = {"W": rng.standard_normal((1, 4 * hidden, size)) * 0.3, "R": rng.standard_normal((1, 4 * hidden, hidden))
               * 0.3, "B": rng.standard_normal((1, 8 * hidden)) * 0.1, "head": rng.standard_normal((hidden, 3))}
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "h"], hidden_size=hidden),
             helper.make_node("Squeeze", ["h", "axes"], ["last"]),
             helper.make_node("MatMul", ["last", "head"], ["logits"])]
    initializers = [numpy_helper.from_array(a.astype(np.float32), n) for n, a in weights.items()]
    initializers.append(numpy_helper.from_array(np.array([0], np.int64), "axes"))
    graph = helper.make_graph(nodes, "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                             [steps, batch, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", ["lenet5", "kws_lstm", "kws_gru", "crnn"])
def test_quantized_zoo_model_matches_onnxruntime(name, form, tmp_path):
    assert_matches_onnxruntime(quantized(models.build(name), form, tmp_path))


@pytest.mark.parametrize("name", ["lenet5", "kws_gru"])
def test_16_bit_qdq_with_onnxruntime_contrib_quantizers_matches_onnxruntime(name, tmp_path):
    """uint16 activations, which onnxruntime's quantizer writes with its own com.microsoft Q / DQ."""
    model = quantized(models.build(name), "qdq16", tmp_path)
    assert {n.op_type for n in model.graph.node if n.domain == "com.microsoft"} == {"QuantizeLinear",
                                                                                     "DequantizeLinear"}
    assert_matches_onnxruntime(model)


def test_qoperator_mobilenet_v2_matches_onnxruntime_exactly(tmp_path):
    """QLinearConv requantized as onnxruntime does (float32 multiplier and product) over 52 convolutions: no
    rounding step apart anywhere, so the logits are equal."""
    model = quantized(models.build("mobilenet_v2"), "qoperator", tmp_path)
    feeds = _feeds(model, np.random.default_rng(5))
    np.testing.assert_array_equal(run_lite(session_for(model), feeds)["logits"], run_ort(model, feeds)["logits"])


def residual_block(channels: int = 16, size: int = 12) -> onnx.ModelProto:
    """x -> Conv -> Relu -> Conv -> Add(x): quantized, x's DequantizeLinear feeds both the first Conv and the Add."""
    rng = np.random.default_rng(3)
    weights = [numpy_helper.from_array((rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype(np.float32),
                                       f"w{i}") for i in (1, 2)]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1] * 4), helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["b"], pads=[1] * 4), helper.make_node("Add", ["b", "x"], ["y"])]
    shape = [1, channels, size, size]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("kernels", ["numpy", "auto"])
def test_qdq_conv_onnxruntime_leaves_unfused_runs_as_it_does(kernels, tmp_path):
    """onnxruntime fuses a DQ -> Conv -> Q into QLinearConv unless the DequantizeLinear also feeds another node
    (the residual Add), and runs that Conv in float32: the first conv gets `ONNXRUNTIME_FLOAT32`, the second
    onnxruntime's integer rule, and the output equals onnxruntime's on the numpy and the default kernels."""
    import lite
    from converter import convert
    from lite.kernels.int8.requantize import ONNXRUNTIME, ONNXRUNTIME_FLOAT32
    buf = convert(quantized(residual_block(), "qdq", tmp_path))
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, kernels=kernels))
    model = onnx.load(tmp_path / "qdq.onnx")
    convs = [step for step in session._plan.steps if step.node.op == "Conv2D"]
    assert [step.node.rounding for step in convs] == [ONNXRUNTIME_FLOAT32, ONNXRUNTIME]
    assert kernels != "numpy" or not convs[0].kernel.compiled
    feeds = _feeds(model, np.random.default_rng(5))
    np.testing.assert_array_equal(run_lite(session, feeds)["y"], run_ort(model, feeds)["y"])


@pytest.mark.slow
@pytest.mark.parametrize("name, form", [("mobilenet_v2", "qdq"), ("mobilenet_v2", "dynamic"), ("resnet18", "dynamic"),
                                        ("resnet18", "qoperator"), ("resnet18", "qdq"), ("resnet50", "qdq")])
def test_deep_quantized_cnn_matches_onnxruntime(name, form, tmp_path):
    """52 (MobileNetV2), 20 (ResNet-18) and 53 (ResNet-50) quantized convolutions in a row: each QDQ Conv that
    onnxruntime fuses runs as its QLinearConv (integer sums, float32 multiplier and product, half to even), each
    it leaves unfused (its input also feeds a residual Add) as its float32 Conv, summed in its order; the
    BatchNorms between the Q / DQ pairs fold in float32 as onnxruntime folds them, and the integer convolutions
    take no Winograd transform. One rounding step apart early would show as several quanta at the logits (0.20
    and 0.14 before on MobileNetV2 QDQ and dynamic; ResNet-18 and ResNet-50 QDQ 2 and 14 quanta with every conv
    integer). Measured: equal logits in all six (ResNet-18 dynamic 4.8e-7 apart), against onnxruntime's default
    session; its unoptimized one is 10 quanta from it on ResNet-50 QDQ (docs/quantization.md)."""
    model = quantized(models.build(name), form, tmp_path)
    feeds = _feeds(model, np.random.default_rng(5))
    want, got = run_ort(model, feeds)["logits"], run_lite(session_for(model), feeds)["logits"]
    quantum = output_quantum(model, "logits")
    assert np.abs(got - want).max() <= (quantum if quantum else 1e-6 * np.ptp(want))


@pytest.mark.parametrize("form", FORMS)
def test_quantized_text_encoder_matches_onnxruntime(form, tmp_path):
    """quantize_dynamic dequantizes the Gather of a quantized embedding table (a computed uint8 tensor); the
    QOperator form brings QLinearAdd / QLinearMul / QLinearSoftmax / QGemm."""
    model = quantized(text_encoder(layers=1)[1], form, tmp_path)
    if form == "qoperator":
        assert {"QLinearSoftmax", "QGemm"} <= {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    assert_matches_onnxruntime(model)


def test_dynamic_quantize_lstm_model_matches_onnxruntime(tmp_path):
    """DynamicQuantizeLSTM quantizes X and h to uint8 at every step as onnxruntime (on one thread) does: within
    1e-5 of the logits' range (1.2e-2 when the dequantized weights ran in float)."""
    from tests.converter.frontends.onnx.test_contrib_ops import run_ort_one_thread
    model = quantized(lstm_model(), "dynamic", tmp_path, op_types_to_quantize=["LSTM"])
    assert "DynamicQuantizeLSTM" in {n.op_type for n in model.graph.node}
    feeds = _feeds(model, np.random.default_rng(5))
    want, got = run_ort_one_thread(model, feeds)["logits"], run_lite(session_for(model), feeds)["logits"]
    assert np.abs(got - want).max() <= 1e-5 * np.ptp(want)


def test_transformers_optimizer_output_matches_onnxruntime(tmp_path):
    """optimize_model fuses the encoder's GELU and residual LayerNorms into com.microsoft Gelu and
    SkipLayerNormalization."""
    optimizer = pytest.importorskip("onnxruntime.transformers.optimizer", reason="onnxruntime's transformer optimizer writes the contrib-op models")
    source = tmp_path / "text.onnx"
    onnx.save(text_encoder()[1], source)
    model = optimizer.optimize_model(str(source), model_type="bert", num_heads=4, hidden_size=32, opt_level=1).model
    assert {"Gelu", "SkipLayerNormalization"} <= {n.op_type for n in model.graph.node if n.domain == "com.microsoft"}
    feeds = _feeds(model, np.random.default_rng(5))
    want, got = run_ort(model, feeds)["logits"], run_lite(session_for(model), feeds)["logits"]
    assert np.abs(got - want).max() <= 1e-6
