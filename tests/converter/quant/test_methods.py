"""Quantization methods past calibration (docs/quantization.md): cross-layer equalization and bias absorption,
weight scale search, AdaRound, mixed precision (full and weight-only) and their configuration errors. Oracles:
onnxruntime on the float ONNX model, brute-force searches and numpy float math."""
from __future__ import annotations

import copy
import itertools
from dataclasses import replace

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from converter import to_graph
from converter.export import to_bytes
from converter.passes.equalize import absorb_biases, absorption_pairs, equalize, pairs
from converter.quant import QuantConfig, parse_config, quantize
from converter.quant.config import MINDSPORE_LITE
from converter.ir import Node
from converter.passes.layers import dense_or_depthwise, depthwise, linear_layer
from converter.quant.adaround import (ITERATIONS, MAX_STEP_SCALE, STEP_BUDGET, LayerStats, Reconstruction, Stepper,
                                      learn_rounding, roundable, output_positions, patches, steps_for, windows)
from converter.quant.calibration import channel_ranges, load_calibration, run_samples, session_for, shared_ranges
from converter.quant.debug import output_sqnr
from converter.quant.mixed_precision import BudgetUnreachableError, relative_error
from converter.quant.weights import channel_scales, dequantize_weight, quantize_weight, weight_range
from lite.status import ParamInvalidError
from tests.converter.quant.test_quantization import run_buf, samples_for
from tests.util import run_ort

RNG = np.random.default_rng(11)


def chain_model(seed: int = 0) -> onnx.ModelProto:
    """Conv3x3 -> Relu -> Conv1x1 -> Conv1x1 -> Clip(0, 6) -> depthwise Conv3x3 -> GlobalAveragePool -> Gemm,
    with output channels of very different weight ranges (what equalization is for)."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        w = rng.standard_normal(shape) * 10 ** rng.uniform(-1.5, 1.5, (shape[0],) + (1,) * (len(shape) - 1))
        return numpy_helper.from_array((w / np.sqrt(np.prod(shape[1:]))).astype(np.float32), name)

    def bias(name: str, n: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.uniform(-0.5, 1.5, n).astype(np.float32), name)

    inits = [weight("w1", 8, 3, 3, 3), bias("b1", 8), weight("w2", 16, 8, 1, 1), bias("b2", 16),
             weight("w3", 12, 16, 1, 1), bias("b3", 12), weight("w4", 12, 1, 3, 3), bias("b4", 12),
             weight("fc_w", 5, 12), bias("fc_b", 5),
             numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"]),
             helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"]),
             helper.make_node("Clip", ["c3", "lo", "hi"], ["r3"]),
             helper.make_node("Conv", ["r3", "w4", "b4"], ["c4"], pads=[1, 1, 1, 1], group=12),
             helper.make_node("GlobalAveragePool", ["c4"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                             [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def conv_weights(graph) -> dict[str, np.ndarray]:
    return {n.name: graph.const(n.inputs[1]) for n in graph.nodes if n.op == "Conv2D"}


# ---- cross-layer equalization and bias absorption --------------------------------------------------------------
def test_equalization_keeps_the_function_and_balances_channel_ranges():
    graph = to_graph(chain_model())
    found = pairs(graph)
    # conv1 -RELU-> conv2 and conv2 -none-> conv3; conv3 -RELU6-> depthwise is left alone
    assert [(p.first.op, p.second.op) for p in found] == [("Conv2D", "Conv2D")] * 2
    relu6_second = next(n for n in graph.nodes if n.op == "Conv2D" and n.attrs.get("group", 1) > 1)
    before = graph.const(relu6_second.inputs[1]).copy()
    assert equalize(graph) == 2
    np.testing.assert_array_equal(graph.const(relu6_second.inputs[1]), before)
    for p in pairs(graph):
        w1, w2 = graph.const(p.first.inputs[1]), graph.const(p.second.inputs[1])
        np.testing.assert_allclose(np.abs(w1).max(axis=(1, 2, 3)), np.abs(w2).max(axis=(0, 1, 2)), rtol=1e-3)
    buf = to_bytes(graph)
    for feeds in samples_for((1, 3, 8, 8), 3):
        np.testing.assert_allclose(run_buf(buf, feeds)["logits"], run_ort(chain_model(), feeds)["logits"],
                                   rtol=1e-4, atol=1e-4)


def test_bias_absorption_centres_channels_exactly_without_an_activation():
    graph = to_graph(chain_model())
    equalize(graph)
    samples = samples_for((1, 3, 8, 8), 4)
    middles = {p.middle for p in absorption_pairs(graph)}
    assert len(middles) == 1                         # conv2 -> conv3 (1x1, no activation, no padding)
    assert absorb_biases(graph, channel_ranges(graph, samples, middles)) == 1
    after = channel_ranges(graph, samples, middles)[middles.pop()]
    np.testing.assert_allclose(after[0], -after[1], atol=1e-4)          # every channel centred on 0
    buf = to_bytes(graph)
    for feeds in samples_for((1, 3, 8, 8), 3, seed=5):                  # unseen inputs: exact all the same
        np.testing.assert_allclose(run_buf(buf, feeds)["logits"], run_ort(chain_model(), feeds)["logits"],
                                   rtol=1e-4, atol=1e-4)


def test_equalization_lowers_the_error_of_the_quantized_model():
    samples = samples_for((1, 3, 8, 8), 8)
    sqnr = []
    for cle in (False, True):
        q = quantize(to_graph(chain_model()), QuantConfig(cross_layer_equalization=cle), samples)
        sqnr.append(output_sqnr(to_graph(chain_model()), q, samples_for((1, 3, 8, 8), 4, seed=9)))
    assert sqnr[1] > sqnr[0] + 1


# ---- weight scale search ---------------------------------------------------------------------------------------
def test_mse_weight_scales_beat_max_min_and_match_a_brute_force_search():
    w = RNG.standard_t(3, (6, 64)).astype(np.float32)               # heavy tails: clipping pays
    bits = 4
    hi = weight_range(bits)[1]

    def error(scale: np.ndarray) -> np.ndarray:
        q = np.clip(np.rint(w / scale[:, None]), -hi, hi)
        return ((q * scale[:, None] - w) ** 2).sum(axis=1)

    mse, maxmin = channel_scales(w, 0, bits, "MSE"), channel_scales(w, 0, bits, "MAX_MIN")
    brute = np.min([error(np.abs(w).max(1) * f / hi) for f in np.linspace(0.3, 1, 701)], axis=0)
    assert np.all(error(mse) <= error(maxmin) + 1e-9)
    np.testing.assert_allclose(error(mse), brute, rtol=0.02)


def test_percentile_weight_scales_clip_at_the_channel_percentile():
    w = RNG.standard_normal((3, 1000)).astype(np.float32)
    expected = np.percentile(np.abs(w), 99.9, axis=1) / 127
    np.testing.assert_allclose(channel_scales(w, 0, 8, "PERCENTILE"), expected, rtol=1e-6)


# ---- AdaRound --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("stride, dilation", [(1, 1), (2, 1), (1, 2)])
def test_patches_times_the_weight_is_the_convolution(stride, dilation):
    model = chain_model()
    graph = to_graph(model)
    conv = graph.nodes[[n.op for n in graph.nodes].index("Conv2D")]
    conv.attrs.update(stride_h=stride, stride_w=stride, dilation_h=dilation, dilation_w=dilation)
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    w = graph.const(conv.inputs[1])                                  # OHWI
    wins = windows((1, 8, 8, 3), conv, w.shape)
    rows = np.arange(output_positions((1, 8, 8, 3), wins))
    p = patches(x.transpose(0, 2, 3, 1), wins, rows)
    y = p.reshape(len(rows), -1) @ w.reshape(w.shape[0], -1).T + graph.const(conv.inputs[2])
    import onnxruntime as ort
    sub = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w1", "b1"], ["y"], pads=[1, 1, 1, 1], strides=[stride] * 2,
                          dilations=[dilation] * 2)], "c",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [i for i in model.graph.initializer if i.name in ("w1", "b1")]), opset_imports=[helper.make_opsetid("", 13)])
    expected = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    np.testing.assert_allclose(y, expected[0].transpose(1, 2, 0).reshape(len(rows), 8), rtol=1e-4, atol=1e-4)


def test_layers_are_found_by_their_traits_not_their_names():
    """Equalization and AdaRound take the ops whose traits say: weight input 1 with output channels on axis 0,
    bias input 2 (Conv2D, FullConnection); MatMul and Conv2DTranspose keep output channels last."""
    node = lambda op, **attrs: Node(op=op, name="n", inputs=["x", "w", "b"], outputs=["y"], attrs=attrs)  # noqa: E731
    assert [linear_layer(node(op)) for op in ("Conv2D", "FullConnection", "MatMul", "Conv2DTranspose", "Add")] == [
        True, True, False, False, False]
    assert depthwise(node("Conv2D", group=12, in_channel=12, out_channel=12))
    assert not dense_or_depthwise(node("Conv2D", group=2, in_channel=12, out_channel=12))
    assert dense_or_depthwise(node("Conv2D", group=1)) and dense_or_depthwise(node("FullConnection"))


def test_learned_rounding_reconstructs_the_layer_output_better_than_nearest():
    x = RNG.standard_normal((512, 24)) @ RNG.standard_normal((24, 24))   # correlated inputs
    w = RNG.standard_normal((8, 24))
    bits = 3
    scales = channel_scales(w, 0, bits)
    gram = cross = x.T @ x
    q = learn_rounding(w, scales, bits, Reconstruction.from_grams(gram, cross, gram, w))
    nearest = np.clip(np.rint(w / scales[:, None]), *weight_range(bits))
    assert np.all(np.abs(q - w / scales[:, None]) < 1 + 1e-5)          # rounds each weight down or up
    error = lambda qq: np.sum((x @ w.T - x @ (qq * scales[:, None]).T) ** 2)  # noqa: E731
    assert error(q) < 0.7 * error(nearest)


def test_learned_rounding_nears_the_brute_force_optimum_of_a_depthwise_sized_4bit_layer():
    """K = 9 (a 3x3 depthwise channel) is small enough to try every up/down choice per output channel: the
    learned rounding must come close to the optimum that nearest rounding misses by about 2x."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 9)) @ rng.standard_normal((9, 9))
    w = rng.standard_normal((16, 9))
    scales = channel_scales(w, 0, 4)
    lo, hi = weight_range(4)
    floor = np.floor(w / scales[:, None])
    choices = floor[:, None, :] + np.array(list(itertools.product((0, 1), repeat=9)))[None]   # [16, 512, 9]
    choices = np.clip(choices, lo, hi)
    errors = np.sum(((x @ w.T)[:, :, None] - np.einsum("rk,ock->roc", x, choices * scales[:, None, None])) ** 2, axis=0)
    optimum = errors.min(axis=1).sum()
    error = lambda q: np.sum((x @ w.T - x @ (q * scales[:, None]).T) ** 2)  # noqa: E731
    gram = x.T @ x
    assert error(np.clip(np.rint(w / scales[:, None]), lo, hi)) > 1.8 * optimum
    recon = Reconstruction.from_grams(gram, gram, gram, w)
    assert error(learn_rounding(w, scales, 4, recon)) < 1.3 * optimum
    steps = steps_for(recon.step_cost(w.shape), ITERATIONS)         # a step this cheap gets 30x the steps
    assert steps == MAX_STEP_SCALE * ITERATIONS
    assert error(learn_rounding(w, scales, 4, recon, steps)) < 1.15 * optimum


def test_cheap_layers_get_more_adaround_steps_within_the_budget():
    """The costliest layers get `iterations` steps; a layer whose step costs less gets more, at most
    MAX_STEP_SCALE times as many, and its steps never cost more than `iterations` steps at STEP_BUDGET."""
    for cost in (1, 1_000, 30_000, 100_000, int(STEP_BUDGET), 10**9):
        steps = steps_for(cost, 100)
        assert 100 <= steps <= 100 * MAX_STEP_SCALE
        assert steps * cost <= max(100 * STEP_BUDGET, 100 * cost)
    assert steps_for(10**9, 100) == 100 and steps_for(100_000, 100) == 1000
    rows = Reconstruction.from_rows(np.zeros((32, 1280)), np.zeros((32, 1280)), np.zeros((1000, 1280)))
    assert rows.step_cost((1000, 1280)) == 2 * 1000 * 1280 * 32


def test_learned_rounding_from_few_rows_matches_their_gram_matrices():
    """Fewer rows than half the patch size are kept as rows (the classifier's case): the same problem."""
    xq = (RNG.standard_normal((10, 64)) @ RNG.standard_normal((64, 64))).astype(np.float32)
    x = xq + 0.01 * RNG.standard_normal(xq.shape).astype(np.float32)
    w = RNG.standard_normal((16, 64))
    scales = channel_scales(w, 0, 3)
    from_rows = learn_rounding(w, scales, 3, Reconstruction.from_rows(xq, x, w))
    from_grams = learn_rounding(w, scales, 3, Reconstruction.from_grams(xq.T @ xq, xq.T @ x, x.T @ x, w))
    assert np.mean(from_rows == from_grams) > 0.99


@pytest.mark.parametrize("outputs", [4, 40])
def test_layer_sums_give_the_output_error_of_any_rounding(outputs):
    """Fewer outputs than patch elements take the float side straight from X W^T, more take the Gram matrices:
    either way the error of integer weights is ||X W^T - X~ Wq^T||^2 by numpy on the rows (within the float32
    sums' precision), for a dense layer and per channel for a 3x3 depthwise one (patches cut by hand)."""
    x = [RNG.standard_normal((1, 5, 5, 8)).astype(np.float32) for _ in range(3)]
    xq = [v + 0.05 * RNG.standard_normal(v.shape).astype(np.float32) for v in x]
    dense = Node("FullConnection", "fc", ["x", "w"], ["y"], {})
    w = RNG.standard_normal((outputs, 8)).astype(np.float32)
    stats = LayerStats(dense, w, 25, 0)
    for a, b in zip(x, xq):
        stats.add(a, b, w.shape)
    rows, rows_q = (np.concatenate([v.reshape(-1, 8) for v in vs]).astype(np.float64) for vs in (x, xq))
    wq = np.rint(w * 4) / 4
    recon = stats.reconstruction()
    assert recon.error(wq) == pytest.approx(np.sum((rows @ w.T - rows_q @ wq.T) ** 2), rel=1e-4)
    conv = Node("Conv2D", "dw", ["x", "w"], ["y"], {"group": 8, "in_channel": 8, "out_channel": 8})
    w = RNG.standard_normal((8, 1, 9)).astype(np.float32)
    stats = LayerStats(conv, w, 9, 0)
    for a, b in zip(x, xq):
        stats.add(a, b, (8, 3, 3, 1))
    cut = lambda v: np.stack([v[0, i:i + 3, j:j + 3].reshape(9, 8) for i in range(3) for j in range(3)])  # noqa: E731
    p, pq = (np.concatenate([cut(v) for v in vs]).astype(np.float64) for vs in (x, xq))   # [rows, 9, channels]
    wq = np.rint(w * 4) / 4
    error = np.sum((np.einsum("rkc,ck->rc", p, w[:, 0]) - np.einsum("rkc,ck->rc", pq, wq[:, 0])) ** 2)
    assert stats.reconstruction().error(wq) == pytest.approx(error, rel=1e-4)


def test_adaround_lowers_the_error_of_low_bit_weights():
    samples = samples_for((1, 3, 8, 8), 8)
    evaluation = samples_for((1, 3, 8, 8), 4, seed=3)
    sqnr = []
    for ada in (False, True):
        q = quantize(to_graph(chain_model()), QuantConfig(weight_bits=4, adaround=ada), samples)
        sqnr.append(output_sqnr(to_graph(chain_model()), q, evaluation))
    assert sqnr[1] > sqnr[0] + 0.5


def test_adaround_steps_through_the_graph_to_each_layer_input_as_a_whole_run_computes_it():
    """The Stepper runs stretch after stretch and hands each layer the tensor a whole run computes, the int8
    ones dequantized, for every sample."""
    samples = samples_for((1, 3, 8, 8), 3)
    q = quantize(to_graph(chain_model()), QuantConfig(method="MAX_MIN"), samples)
    layers = [n for n in q.topological() if roundable(q, n)]
    seen: list[dict[str, np.ndarray]] = []
    for sample in samples:
        seen.append({})
        run_samples(session_for(q), [sample], lambda k, a: seen[-1].setdefault(k, a.copy()), "")
    stepper = Stepper(q, samples, layers)
    assert len(layers) == 5
    for node in layers:
        name, p = node.inputs[0], q.values[node.inputs[0]].quant_params[0]
        for got, whole in zip(stepper.advance(node), seen):
            assert whole[name].dtype == np.int8
            np.testing.assert_array_equal(got, (whole[name].astype(np.float32) - p.zeroPoint) * np.float32(p.scale))


# ---- mixed precision -------------------------------------------------------------------------------------------
def test_mixed_precision_meets_the_budget_with_fewer_bits(capsys):
    samples = samples_for((1, 3, 8, 8), 8)
    explicit = QuantConfig(preset=MINDSPORE_LITE)
    sqnr = {b: output_sqnr(to_graph(chain_model()), quantize(to_graph(chain_model()), replace(explicit, weight_bits=b),
                                                              samples), samples[:8]) for b in (4, 8)}
    budget = (sqnr[4] + sqnr[8]) / 2
    q = quantize(to_graph(chain_model()), QuantConfig(min_output_sqnr=budget, preset=MINDSPORE_LITE), samples)
    assert output_sqnr(to_graph(chain_model()), q, samples[:8]) >= budget
    bits = [q.values[n.inputs[1]].quant_params[0].numBits for n in q.nodes
            if n.op in ("Conv2D", "FullConnection") and q.values[n.inputs[1]].quant_params]
    assert min(bits) < 8 and "weight bits" in capsys.readouterr().err


def test_unreachable_budget_is_a_named_error():
    with pytest.raises(BudgetUnreachableError, match="min_output_sqnr = 300"):
        quantize(to_graph(chain_model()), QuantConfig(min_output_sqnr=300, preset=MINDSPORE_LITE),
                 samples_for((1, 3, 8, 8), 4))


def test_mixed_bit_weight_quant_takes_the_fewest_bits_within_init_scale():
    graph = quantize(to_graph(chain_model()), parse_config(
        "[common_quant_param]\nquant_type=MIXED_BIT_WEIGHT_QUANT\nmin_quant_weight_channel=4\n"
        "[mixed_bit_weight_quant_param]\ninit_scale=0.05\n").validate())
    reference = to_graph(chain_model())
    weights = {n.name: reference.const(n.inputs[1]) for n in reference.nodes
               if n.op in ("Conv2D", "FullConnection")}
    chosen = {}
    for n in graph.nodes:
        if n.op == "QuantDTypeCast" and graph.values[n.inputs[0]].quant_params:
            reader = next(r for r in graph.nodes if n.outputs[0] in r.inputs)
            chosen[reader.name] = graph.values[n.inputs[0]].quant_params[0].numBits
    assert chosen.keys() == weights.keys()
    for name, bits in chosen.items():
        assert relative_error(weights[name], 0, bits) <= 0.05
        assert bits == 2 or relative_error(weights[name], 0, bits - 1) > 0.05
    feeds = samples_for((1, 3, 8, 8), 1)[0]
    expected = run_ort(chain_model(), feeds)["logits"]
    assert np.abs(run_buf(to_bytes(graph), feeds)["logits"] - expected).max() < 0.2 * np.abs(expected).max()


# ---- configuration ---------------------------------------------------------------------------------------------
def test_method_keys_parse():
    cfg = parse_config("[full_quant_param]\nweight_quant_method=mse\ncross_layer_equalization=true\n"
                       "adaround=true\nadaround_iterations=50\nmin_output_sqnr=25.5\n").validate()
    assert (cfg.weight_method, cfg.cross_layer_equalization, cfg.adaround, cfg.adaround_iterations,
            cfg.min_output_sqnr) == ("MSE", True, True, 50, 25.5)


@pytest.mark.parametrize("text, key", [
    ("[full_quant_param]\nweight_quant_method=L1\n", "weight_quant_method"),
    ("[full_quant_param]\nadaround_iterations=0\n", "adaround_iterations"),
    ("[full_quant_param]\nmin_output_sqnr=high\n", "min_output_sqnr"),
    ("[full_quant_param]\ncross_layer_equalization=yes\n", "cross_layer_equalization"),
    ("[common_quant_param]\nweight_bit_num=12\n", "weight_bit_num = 12"),
    ("[mixed_bit_weight_quant_param]\ninit_scale=2\n", "init_scale"),
])
def test_bad_method_config_names_the_key(text, key):
    with pytest.raises(ParamInvalidError, match=key):
        parse_config(text).validate()


def test_empty_calibration_folder_names_the_key(tmp_path):
    cfg = QuantConfig(calibrate_path={"": str(tmp_path)})
    with pytest.raises(ParamInvalidError, match="calibrate_path.*has no"):
        load_calibration(to_graph(chain_model()), cfg)
    with pytest.raises(ParamInvalidError, match="calibrate_path"):
        quantize(to_graph(chain_model()), QuantConfig(), [])


# ---- ranges shared through same-quant ops -------------------------------------------------------------------------
def test_same_quant_chains_share_the_widest_range():
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm: the max pool and the flatten reuse their input's int8
    parameters, so the conv output's range must cover theirs (a clipping method set the pool's input below the
    largest values the pool passes on); the Gemm's output keeps its own."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((3, 16)).astype(np.float32), "fc")]
    nodes = [helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["logits"], transB=1)]
    graph = to_graph(helper.make_model(helper.make_graph(
        nodes, "pool", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3])], inits),
        opset_imports=[helper.make_opsetid("", 13)]))
    (conv,), (pool,) = graph.op_nodes("Conv2D"), graph.op_nodes("Pooling")
    chain = [conv.outputs[0], pool.outputs[0]]
    chain += [n.outputs[0] for n in graph.nodes if n.inputs and n.inputs[0] == pool.outputs[0]]
    assert len(chain) == 3
    ranges = dict(zip(chain, [(0.0, 4.0), (0.0, 5.0), (-1.0, 6.0)]))
    ranges["input"], ranges["logits"] = (-2.0, 2.0), (-9.0, 9.0)
    shared = shared_ranges(graph, ranges)
    assert [shared[name] for name in chain] == [(-1.0, 6.0)] * 3
    assert shared["input"] == (-2.0, 2.0) and shared["logits"] == (-9.0, 9.0)
