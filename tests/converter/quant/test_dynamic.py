"""Dynamic quantization (quant_type=DYNAMIC_QUANT): the config key, the converted graph, and the DYNAMIC
FullConnection kernels on both backends against onnx.reference's DynamicQuantizeLinear + MatMulInteger and
against onnxruntime's float model."""
from __future__ import annotations

import importlib.util

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import lite
from converter.quant import DYNAMIC_QUANT, QuantConfig, convert_quantized, parse_config
from lite.kernels.int8.dynamic_matmul import quantize_rows
from lite.model import Model
from lite.status import NotSupportedError, ParamInvalidError
from schema import fb
from tests.util import run_ort

HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"))]
RNG = np.random.default_rng(0)
K, N1, N2 = 80, 48, 36      # K not a multiple of 4 and N2 not of the tile width: padded groups and masked columns


def mlp() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """x [2, 7, K] -> MatMul + bias -> Relu -> MatMul + bias: two FullConnections after conversion."""
    w1 = RNG.normal(0, 0.2, (K, N1)).astype(np.float32)
    w2 = RNG.normal(0, 0.2, (N1, N2)).astype(np.float32)
    b1, b2 = (RNG.normal(0, 0.5, n).astype(np.float32) for n in (N1, N2))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h1"]),
             helper.make_node("Relu", ["h1"], ["h"]), helper.make_node("MatMul", ["h", "w2"], ["y0"]),
             helper.make_node("Add", ["y0", "b2"], ["y"])]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 7, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 7, N2])],
                              [numpy_helper.from_array(v, n) for n, v in
                               (("w1", w1), ("w2", w2), ("b1", b1), ("b2", b2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = RNG.normal(0, 1, (2, 7, K)).astype(np.float32)
    x[0, 3] *= 20                                   # one loud token: its own range, not everyone's
    return model, {"x": x}


def dynamic_file(model: onnx.ModelProto) -> bytes:
    return convert_quantized(model, QuantConfig(quant_type=DYNAMIC_QUANT, min_quant_weight_channel=0))


def run(buf: bytes, feeds: dict[str, np.ndarray], kernels: str) -> np.ndarray:
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, kernels=kernels))
    for name, value in feeds.items():
        s.GetInputsByTensorName(name).set_data(value)
    s.RunGraph()
    return next(iter(s.GetOutputs().values())).numpy().copy()


def integer_reference(x2d: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Each row through `integer_product` (its own range), the weight [K, N] quantized per column."""
    return np.array([integer_product(row[None], w.T)[0] for row in x2d]) + b


def test_config_key_names_mindspore_lites_dynamic_quant():
    cfg = parse_config("[common_quant_param]\nquant_type=DYNAMIC_QUANT\nbit_num=8\n")
    assert cfg.validate().quant_type == DYNAMIC_QUANT
    with pytest.raises(ParamInvalidError, match="weight_bit_num = 9"):
        parse_config("[common_quant_param]\nquant_type=DYNAMIC_QUANT\nbit_num=9\n").validate()


def test_rows_quantize_as_dynamic_quantize_linear_does_each():
    x = RNG.normal(0, 3, (5, 37)).astype(np.float32)
    x[1] = np.abs(x[1])                 # all positive: zero point 0
    x[2] = 0.0                          # all zero: scale 1/255
    ref = ReferenceEvaluator(helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]))
    q, scale, zero = quantize_rows(x)
    for m in range(len(x)):
        rq, rs, rz = ref.run(None, {"x": x[m]})
        np.testing.assert_array_equal(q[m], rq)
        assert scale[m] == rs and zero[m] == rz


def test_the_file_marks_the_products_dynamic_with_int8_weights():
    model, _ = mlp()
    m = Model.Import(dynamic_file(model))
    dynamic = [n for n in m.nodes if n.quant_type == fb.QuantType.DYNAMIC]
    assert [n.op for n in dynamic] == ["FullConnection", "FullConnection"]
    assert all(m.tensors[n.inputs[1]].data_type == lite.DataType.INT8 for n in dynamic)


@pytest.mark.parametrize("kernels", BACKENDS)
def test_outputs_match_the_integer_reference_and_stay_near_float(kernels):
    model, feeds = mlp()
    buf = dynamic_file(model)
    y = run(buf, feeds, kernels)
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    # the first layer alone: a model cut after its bias add
    first = onnx.helper.make_model(helper.make_graph(
        list(model.graph.node[:2]), "first", list(model.graph.input),
        [helper.make_tensor_value_info("h1", TensorProto.FLOAT, [2, 7, N1])], list(model.graph.initializer)),
        opset_imports=model.opset_import)
    h1 = run(dynamic_file(first), feeds, kernels)
    expected = integer_reference(feeds["x"].reshape(-1, K), init["w1"], init["b1"]).reshape(h1.shape)
    np.testing.assert_allclose(h1, expected, rtol=1e-5, atol=1e-5 * np.abs(expected).max())
    reference = run_ort(model, feeds)["y"]
    error = np.abs(y - reference).max() / np.abs(reference).max()
    assert error < 0.02, error


def test_both_backends_give_the_same_bits():
    if not HAVE_NUMBA:
        pytest.skip("numba not installed")
    model, feeds = mlp()
    buf = dynamic_file(model)
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels="compiled"))
    assert [step.node.op for step in s._plan.steps if step.kernel.compiled] == ["FullConnection"] * 2
    np.testing.assert_array_equal(run(buf, feeds, "numpy"), run(buf, feeds, "compiled"))


def lstm(direction: str = "bidirectional", lengths: bool = False
         ) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """An ONNX LSTM [T 9, B 2, I 24] -> H 20 with bias and initial states (and sequence lengths 9 and 5); its float
    weights."""
    d, h, i = 2 if direction == "bidirectional" else 1, 20, 24
    weights = {"W": RNG.normal(0, 0.3, (d, 4 * h, i)), "R": RNG.normal(0, 0.3, (d, 4 * h, h)),
               "B": RNG.normal(0, 0.2, (d, 8 * h)), "h0": RNG.normal(0, 0.5, (d, 2, h)),
               "c0": RNG.normal(0, 0.5, (d, 2, h))}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    lens = [numpy_helper.from_array(np.array([9, 5], np.int32), "lens")] if lengths else []
    node = helper.make_node("LSTM", ["x", "W", "R", "B", "lens" if lengths else "", "h0", "c0"], ["y", "yh", "yc"],
                            hidden_size=h, direction=direction)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [9, 2, i])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [9, d, 2, h])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()] + lens)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, {"x": RNG.normal(0, 1, (9, 2, i)).astype(np.float32)}, weights


def ort_dynamic_lstm(weights: dict[str, np.ndarray], direction: str, lengths: bool = False) -> onnx.ModelProto:
    """onnxruntime's DynamicQuantizeLSTM (com.microsoft) on W and R quantized as the converter does: symmetric
    int8 per direction and gate row (W and R transposed to its [D, in, 4H] layout)."""
    tensors = dict(weights)
    for name in ("W", "R"):
        w = weights[name].astype(np.float64)
        scale = np.abs(w).max(axis=-1) / 127
        tensors[name] = np.clip(np.rint(w / scale[..., None]), -127, 127).astype(np.int8).transpose(0, 2, 1)
        tensors[f"{name}_scale"] = scale.astype(np.float32)
        tensors[f"{name}_zero_point"] = np.zeros(scale.shape, np.int8)
    d, h = weights["R"].shape[0], weights["R"].shape[2]
    if lengths:
        tensors["lens"] = np.array([9, 5], np.int32)
    inputs = ["x", "W", "R", "B", "lens" if lengths else "", "h0", "c0", "", "W_scale", "W_zero_point", "R_scale",
              "R_zero_point"]
    node = helper.make_node("DynamicQuantizeLSTM", inputs, ["y"],
                            domain="com.microsoft", hidden_size=h, direction=direction)
    graph = helper.make_graph([node], "lstm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [9, 2, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [9, d, 2, h])],
                              [numpy_helper.from_array(v, k) for k, v in tensors.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                   helper.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("direction, lengths", [("forward", False), ("bidirectional", False), ("reverse", True)])
def test_lstm_runs_as_onnxruntimes_dynamic_quantize_lstm(kernels, direction, lengths):
    model, feeds, weights = lstm(direction, lengths)
    buf = convert_quantized(model, QuantConfig(quant_type=DYNAMIC_QUANT))
    lstm_nodes = [n for n in Model.Import(buf).nodes if n.op == "LSTM"]
    assert [n.quant_type for n in lstm_nodes] == [fb.QuantType.DYNAMIC]
    y = run(buf, feeds, kernels)
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels=kernels))
    assert [step.kernel.compiled for step in s._plan.steps] == [kernels == "compiled" and not lengths]
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1        # on more threads it quantizes h per block of batch rows
    expected = onnxruntime.InferenceSession(ort_dynamic_lstm(weights, direction, lengths).SerializeToString(), options,
                                            providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    scale = np.abs(expected).max()
    np.testing.assert_allclose(y, expected, atol=1e-5 * scale)
    float_error = np.abs(y - run_ort(model, feeds)["y"]).max() / scale
    assert 1e-4 < float_error < 0.05, float_error      # quantized, and near float (random weights: 3.4e-2)


def gru(linear_before_reset: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """An ONNX bidirectional GRU [T 7, B 3, I 16] -> H 24 with bias and initial state; its float weights."""
    d, h, i = 2, 24, 16
    weights = {"W": RNG.normal(0, 0.3, (d, 3 * h, i)), "R": RNG.normal(0, 0.3, (d, 3 * h, h)),
               "B": RNG.normal(0, 0.2, (d, 6 * h)), "h0": RNG.normal(0, 0.5, (d, 3, h))}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    node = helper.make_node("GRU", ["x", "W", "R", "B", "", "h0"], ["y"], hidden_size=h, direction="bidirectional",
                            linear_before_reset=linear_before_reset)
    graph = helper.make_graph([node], "gru", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [7, 3, i])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, d, 3, h])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    return model, {"x": RNG.normal(0, 1, (7, 3, i)).astype(np.float32)}, weights


def integer_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x [M, K] @ w[N, K]^T with x through onnx.reference's DynamicQuantizeLinear (one range) and MatMulInteger,
    w quantized per row (symmetric int8), scaled back in float64."""
    ref = ReferenceEvaluator(helper.make_graph(
        [helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
         helper.make_node("MatMulInteger", ["q", "w", "z"], ["acc"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("w", TensorProto.INT8, None)],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("acc", TensorProto.INT32), ("s", TensorProto.FLOAT))]),
        opsets={"": 17})
    scale = np.abs(w.astype(np.float64)).max(axis=1) / 127
    wq = np.clip(np.rint(w / scale[:, None]), -127, 127).astype(np.int8)
    acc, s = ref.run(None, {"x": x.astype(np.float32), "w": wq.T.copy()})
    return acc * (float(s) * scale)


def gru_reference(x: np.ndarray, weights: dict[str, np.ndarray], linear_before_reset: int) -> np.ndarray:
    """ONNX GRU's equations, step by step, every product through `integer_product` (X over all steps, h over the
    batch at each step)."""
    sigmoid = lambda v: 1 / (1 + np.exp(-v))        # noqa: E731
    d_count, g3, _ = weights["W"].shape
    h = g3 // 3
    t_len, b_len, _ = x.shape
    y = np.zeros((t_len, d_count, b_len, h))
    for d in range(d_count):
        w, r, bias = weights["W"][d], weights["R"][d], weights["B"][d].astype(np.float64)
        wb, rb = bias[:g3], bias[g3:]
        projected = integer_product(x.reshape(-1, x.shape[2]), w).reshape(t_len, b_len, g3) + wb
        state = weights["h0"][d].astype(np.float64)
        for t in (range(t_len) if d == 0 else range(t_len - 1, -1, -1)):
            p = projected[t]
            if linear_before_reset:
                rec = integer_product(state, r) + rb
                z, reset = sigmoid(p[:, :h] + rec[:, :h]), sigmoid(p[:, h:2 * h] + rec[:, h:2 * h])
                cand = np.tanh(p[:, 2 * h:] + reset * rec[:, 2 * h:])
            else:
                rec = integer_product(state, r[:2 * h]) + rb[:2 * h]
                z, reset = sigmoid(p[:, :h] + rec[:, :h]), sigmoid(p[:, h:2 * h] + rec[:, h:2 * h])
                cand = np.tanh(p[:, 2 * h:] + integer_product(reset * state, r[2 * h:]) + rb[2 * h:])
            state = (1 - z) * cand + z * state
            y[t, d] = state
    return y


@pytest.mark.parametrize("kernels", BACKENDS)
@pytest.mark.parametrize("linear_before_reset", [1, 0])
def test_gru_follows_its_equations_with_integer_products(kernels, linear_before_reset):
    model, feeds, weights = gru(linear_before_reset)
    buf = convert_quantized(model, QuantConfig(quant_type=DYNAMIC_QUANT))
    y = run(buf, feeds, kernels)
    s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels=kernels))
    assert [step.kernel.compiled for step in s._plan.steps] == [kernels == "compiled" and linear_before_reset == 1]
    expected = gru_reference(feeds["x"], weights, linear_before_reset)
    np.testing.assert_allclose(y, expected, atol=1e-5 * np.abs(expected).max())
    float_error = np.abs(y - run_ort(model, feeds)["y"]).max() / np.abs(expected).max()
    assert 1e-4 < float_error < 0.05, float_error


@pytest.mark.parametrize("make", [mlp, lstm])
def test_a_dynamic_node_without_int8_weights_is_refused_naming_it(make):
    from converter import to_graph
    from converter.export import to_bytes
    model = make()[0]
    graph = to_graph(model)
    node = next(n for n in graph.nodes if n.op in ("FullConnection", "LSTM"))
    node.quant_type = fb.QuantType.DYNAMIC                 # marked, but its weights left float
    buf = to_bytes(graph)
    with pytest.raises(NotSupportedError, match=f"{node.op} node '{node.name}': dynamic quantization needs"):
        lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def test_a_bert_layers_gelu_and_residual_sums_run_in_its_dynamic_products():
    """TinyBert (dynamic shapes, padding mask): each feed-forward's GELU becomes its first layer's activation, the
    residual sums ride on the output projections; the compiled kernels give the numpy kernels' outputs (the
    integer sums are the same, the compiled GELU is within ~2e-7 of erf's) and both stay near onnxruntime's float
    model."""
    from tests.converter.passes.test_transformer_fusion import bert_feeds, tiny_bert_model
    model = tiny_bert_model()
    buf = dynamic_file(model)
    m = Model.Import(buf)
    dynamic = [n for n in m.nodes if n.quant_type == fb.QuantType.DYNAMIC]
    assert len(dynamic) == 12 and not [n for n in m.nodes if n.op == "Activation"]
    assert sum(n.attrs.activation == fb.ActivationType.GELU for n in dynamic) == 2
    assert sum(len(n.inputs) == 4 for n in dynamic) == 4                 # o and down carry the residual sums
    feeds = bert_feeds(3, 9)
    reference = run_ort(model, feeds)["y"]
    outputs = {kernels: run(buf, feeds, kernels) for kernels in ("numpy", "compiled") if HAVE_NUMBA or
               kernels == "numpy"}
    for y in outputs.values():
        cosine = (y * reference).sum(-1) / np.linalg.norm(y, axis=-1) / np.linalg.norm(reference, axis=-1)
        assert cosine.min() > 0.99, cosine.min()
    if HAVE_NUMBA:
        np.testing.assert_allclose(outputs["compiled"], outputs["numpy"], rtol=1e-4, atol=1e-4)
