"""Post-training quantization (converter/quant, docs/quantization.md): config, observers, weight quantization,
the int8 rewrite, bias correction and the debug report. Oracles: onnxruntime on models with hand-quantized
weights, pure-Python references written from the contract, and numpy float math."""
from __future__ import annotations

import json
import math

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from converter.ir import Graph, Node, Value
from converter.quant import QuantConfig, parse_config, quantize
from converter.quant.config import MINDSPORE_LITE
from converter.quant import bias_correction
from converter.quant.bias_correction import correct_biases, correct_biases_if_better
from converter.quant.calibration import calibrate, load_calibration
from converter.quant.debug import Agreement, format_report, output_sqnr
from converter.quant.full_quant import full_quantize, split_activations
from converter.quant import observers
from converter.quant.observers import (KLObserver, MaxMinObserver, PercentileObserver, RemovalOutlierObserver,
                                       kl_threshold)
from converter.quant.qparams import activation_param
from converter.quant.weights import quantize_weight
from lite.status import ParamInvalidError
from schema import fb
from tests.util import run_lite, run_ort, small_cnn

RNG = np.random.default_rng(7)


def samples_for(shape: tuple[int, ...], count: int = 6, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"input": rng.standard_normal(shape).astype(np.float32)} for _ in range(count)]


def run_buf(buf: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return run_lite(lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1)), feeds)


# ---- config ---------------------------------------------------------------------------------------------------
def test_ini_config_sets_every_section(tmp_path):
    (tmp_path / "calib").mkdir()
    cfg = parse_config("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=7\nactivation_bit_num=8\n"
                       "min_quant_weight_size=10\nmin_quant_weight_channel=4\n"
                       "[data_preprocess_param]\ncalibrate_path=input:calib\ncalibrate_size=3\ninput_type=BIN\n"
                       "[full_quant_param]\nactivation_quant_method=KL\nbias_correction=true\n", str(tmp_path))
    cfg.validate()
    assert (cfg.activation_bits, cfg.weight_bits, cfg.min_quant_weight_size, cfg.min_quant_weight_channel) == \
        (8, 7, 10, 4)
    assert cfg.calibrate_path == {"input": str(tmp_path / "calib")}
    assert (cfg.calibrate_size, cfg.method, cfg.bias_correction) == (3, "KL", True)


def test_old_key_value_config(tmp_path):
    (tmp_path / "calib").mkdir()
    cfg = parse_config("image_path=calib\nbatch_count=5\nmethod_x=RemovalOutlier\nbias_correction=false\n"
                       "thread_num=2\n", str(tmp_path)).validate()
    assert (cfg.calibrate_path, cfg.calibrate_size, cfg.method) == ({"": str(tmp_path / "calib")}, 5,
                                                                    "REMOVAL_OUTLIER")


@pytest.mark.parametrize("text, key", [
    ("[common_quant_param]\nbits=8\n", "'bits'"),
    ("[full_quant_param]\nactivation_quant_method=MEDIAN\n", "activation_quant_method"),
    ("[common_quant_param]\nbit_num=9\n", "bit_num = 9"),
    ("[common_quant_param]\nactivation_bit_num=1\n", "activation_bit_num = 1"),
    ("image_path=x\nfoo=1\n", "'foo'"),
])
def test_bad_config_names_the_key(tmp_path, text, key):
    with pytest.raises(ParamInvalidError, match=key.replace("[", r"\[")):
        parse_config(text.replace("image_path=x", f"image_path={tmp_path}"), str(tmp_path)).validate()


def test_weight_only_takes_16_bits():
    assert QuantConfig(quant_type="WeightQuant", weight_bits=16).validate().weight_bits == 16


def test_missing_calibration_folder_is_named(tmp_path):
    with pytest.raises(ParamInvalidError, match="nowhere"):
        parse_config("[data_preprocess_param]\ncalibrate_path=input:nowhere\n", str(tmp_path)).validate()


def test_wrong_bin_size_names_the_file(tmp_path):
    np.zeros(10, np.float32).tofile(tmp_path / "a.bin")
    cfg = QuantConfig(calibrate_path={"input": str(tmp_path)})
    with pytest.raises(ParamInvalidError, match="a.bin"):
        load_calibration(to_graph(small_cnn()), cfg)


def test_bin_and_npy_calibration_files_load_as_the_input(tmp_path):
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    x.tofile(tmp_path / "0.bin")
    np.save(tmp_path / "1.npy", x * 2)
    samples = load_calibration(to_graph(small_cnn()), QuantConfig(calibrate_path={"": str(tmp_path)}))
    np.testing.assert_array_equal(samples[0]["input"], x)
    np.testing.assert_array_equal(samples[1]["input"], x * 2)


# ---- observers ------------------------------------------------------------------------------------------------
def test_max_min_keeps_extremes_over_batches():
    obs = MaxMinObserver()
    for batch in (np.array([-1.0, 2.0]), np.array([-3.0, 0.5])):
        obs.update(batch)
    assert obs.range() == (-3.0, 2.0)


def _range(obs, *batches):
    for b in batches:
        obs.update(b)
    return obs.range()


def test_removal_outlier_ignores_a_lone_extreme():
    lo, hi = _range(RemovalOutlierObserver(), np.concatenate([RNG.uniform(-1, 1, 100_000), [1000.0]]))
    assert -1.01 < lo < -0.99 and 0.99 < hi < 1.01


def test_removal_outlier_covers_every_batch():
    """One sample per batch: a brighter sample widens the range (an average of per-batch extremes would
    clip it to 2)."""
    lo, hi = _range(RemovalOutlierObserver(), RNG.uniform(-1, 1, 100_000), RNG.uniform(-3, 3, 100_000))
    assert -3.01 < lo < -2.99 and 2.99 < hi < 3.01


def test_histogram_grows_by_merging_bins_exactly():
    obs = KLObserver()
    first = np.arange(0, 1024, 0.25)               # max 1023.75 (mid last bin) -> bin width 0.5
    second = -np.arange(0, 3000.0, 0.75)           # max 2999.25 -> the range grows 4x, width 2
    obs.update(first)
    obs.update(second)
    values = np.abs(np.concatenate([first, second]))
    expected = np.bincount((values[values != 0] // 2).astype(int), minlength=2048)
    assert obs.width == 2.0 and obs.zeros == 2
    np.testing.assert_array_equal(obs.hist, expected)


def reference_kl_threshold(hist: list[int], levels: int) -> int:
    """TensorRT's entropy calibration in plain Python: the bin count i minimising KL(P_i || Q_i)."""
    best, best_i = math.inf, len(hist)
    for i in range(levels, len(hist) + 1):
        p = [float(v) for v in hist[:i]]
        p[-1] += sum(hist[i:])
        if sum(p) == 0:
            continue
        q = [0.0] * i
        for j in range(levels):
            start, stop = j * i // levels, (j + 1) * i // levels
            nonzero = [k for k in range(start, stop) if hist[k] > 0]
            for k in nonzero:
                q[k] = sum(hist[start:stop]) / len(nonzero)
        if sum(q) == 0:
            continue
        sp, sq = sum(p), sum(q)
        kl = sum(pk / sp * math.log((pk / sp) / ((qk or 1e-12) / sq)) for pk, qk in zip(p, q) if pk > 0)
        if kl < best:
            best, best_i = kl, i
    return best_i


def test_kl_threshold_matches_tensorrt_reference():
    x = np.abs(np.concatenate([RNG.standard_normal(20_000), RNG.standard_normal(20) * 8]))
    hist = np.histogram(x, bins=256, range=(0, x.max()))[0]
    assert kl_threshold(hist, 1.0, 16) == reference_kl_threshold(hist.tolist(), 16)


def test_kl_clips_a_long_tail():
    x = np.concatenate([RNG.standard_normal(50_000), [60.0, -60.0]])
    lo, hi = _range(KLObserver(), x)
    assert 2 < hi < 20 and -20 < lo < -2


def test_kl_does_not_clip_most_of_a_discrete_input():
    """Normalised 8-bit pixels, mostly background: a threshold search on their sparse histogram must not cut
    below the background value."""
    pixels = np.where(RNG.random(200_000) < 0.8, 0, RNG.integers(0, 256, 200_000))
    x = ((pixels / 255 - 0.1307) / 0.3081).astype(np.float32)
    lo, hi = _range(KLObserver(), x)
    assert lo == pytest.approx(x.min()) and hi > 1.5


def test_kl_of_a_relu_output_uses_every_level_and_ignores_exact_zeros(monkeypatch):
    """A ReLU output: 70 % exact zeros, the rest half-normal. Its asymmetric 6-bit range has 64 levels on
    [0, T]; the zeros are exact whatever T. The threshold is the reference search over the non-zero values'
    histogram with 64 levels (with the zeros in the first bin, the search clips at about 1 sigma)."""
    monkeypatch.setattr(observers, "BINS", 256)
    x = np.abs(RNG.standard_normal(200_000)) * (RNG.random(200_000) < 0.3)
    obs = KLObserver(bits=6)
    obs.update(x)
    nonzero = x[x != 0]
    width = nonzero.max() / 255.5                   # the maximum falls in the middle of the last bin
    hist = np.bincount((nonzero / width).astype(int), minlength=256)
    assert obs.range() == (0.0, pytest.approx(reference_kl_threshold(hist.tolist(), 64) * width))
    assert obs.range()[1] > 2.5


def relu6_chain() -> onnx.ModelProto:
    """input [1, 4, 30, 30] -> Conv -> Clip(0, 6) -> Conv -> output `y`."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w1", (4, 4, 1, 1)), ("w2", (3, 4, 1, 1)))]
    inits += [numpy_helper.from_array(np.float32(v), n) for n, v in (("zero", 0.0), ("six", 6.0))]
    nodes = [onnx.helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1"),
             onnx.helper.make_node("Clip", ["c1", "zero", "six"], ["r1"], name="relu6"),
             onnx.helper.make_node("Conv", ["r1", "w2"], ["y"], name="conv2")]
    graph = onnx.helper.make_graph(nodes, "relu6_chain",
                                   [onnx.helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, [1, 4, 30, 30])],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 13)])


@pytest.mark.parametrize("method", ["KL", "REMOVAL_OUTLIER", "PERCENTILE"])
def test_relu6_outputs_and_graph_outputs_keep_their_observed_extremes(method):
    """Clipping methods leave clamp-bounded activations and graph outputs at min/max; the long-tailed input
    is clipped."""
    graph = split_activations(to_graph(relu6_chain()))
    samples = [{"input": (RNG.standard_normal((1, 4, 30, 30)) * 3).astype(np.float32)} for _ in range(20)]
    samples[3]["input"][0, 1, 2, 3] = samples[7]["input"][0, 2, 5, 1] = 80.0
    clipped = {k: o.range() for k, o in calibrate(graph, samples, method, 8).items()}
    extremes = {k: o.range() for k, o in calibrate(graph, samples, "MAX_MIN", 8).items()}
    relu6 = next(n.outputs[0] for n in graph.nodes if n.attrs.get("activation") == fb.ActivationType.RELU6)
    assert clipped[relu6] == extremes[relu6] and clipped[relu6][1] == 6.0
    assert clipped["y"] == extremes["y"]
    assert clipped["input"][1] < extremes["input"][1]


def fake_quant_mse(x: np.ndarray, lo: float, hi: float, bits: int) -> float:
    """Mean squared error of x after rounding to 2^bits levels on [lo, hi] (0 included), written here."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    step = (hi - lo) / (2 ** bits - 1)
    zero = np.round(-lo / step)
    q = np.clip(np.round(x / step) + zero, 0, 2 ** bits - 1)
    return float(np.mean(((q - zero) * step - x) ** 2))


@pytest.mark.parametrize("relu", [False, True])
def test_mse_threshold_is_near_the_best_clip_by_brute_force(relu):
    x = RNG.standard_t(3, 200_000)
    x = np.maximum(x, 0) if relu else x
    obs = observers.MSEObserver(bits=4)
    obs.update(x)
    lo, hi = obs.range()
    candidates = np.linspace(0.05, 1, 200) * np.abs(x).max()
    best = min(fake_quant_mse(x, max(x.min(), -t), min(x.max(), t), 4) for t in candidates)
    assert fake_quant_mse(x, lo, hi, 4) <= best * 1.03
    assert fake_quant_mse(x, lo, hi, 4) < 0.5 * fake_quant_mse(x, x.min(), x.max(), 4)


def test_percentile_threshold_of_abs_values():
    x = RNG.uniform(-1, 1, 1_000_000)
    lo, hi = _range(PercentileObserver(), x)
    assert abs(hi - 0.9999) < 2e-3 and abs(lo + 0.9999) < 2e-3


# ---- weights --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bits", [2, 4, 7, 8, 12, 16])
def test_per_channel_weights_are_symmetric_and_round_to_nearest(bits):
    w = RNG.standard_normal((5, 3, 3, 4)).astype(np.float32) * np.arange(1, 6)[:, None, None, None]
    q, params = quantize_weight(w, 0, bits)
    top = 2 ** (bits - 1) - 1
    scales = np.array([p.scale for p in params])
    np.testing.assert_allclose(scales, np.abs(w).reshape(5, -1).max(1) / top)
    assert all(p.zeroPoint == 0 for p in params)
    assert np.abs(q).reshape(5, -1).max(1).tolist() == [top] * 5
    assert np.abs(q * scales[:, None, None, None] - w).max() <= scales.max() / 2 + 1e-6


def test_one_bit_weights_are_ternary():
    q, _ = quantize_weight(RNG.standard_normal((4, 8)).astype(np.float32), 0, 1)
    assert set(np.unique(q).tolist()) <= {-1, 0, 1}


def reference_dequantized(w: np.ndarray, bits: int) -> np.ndarray:
    """Per output channel (axis 0, ONNX OIHW / Gemm [out, in]) symmetric rounding, written from the contract."""
    top = 2 ** (bits - 1) - 1
    out = np.empty_like(w)
    for c in range(w.shape[0]):
        scale = float(np.abs(w[c]).max()) / top
        out[c] = np.clip(np.rint(w[c].astype(np.float64) / scale), -top, top) * scale
    return out


@pytest.mark.parametrize("bits", [4, 8, 12])
def test_weight_only_model_runs_like_hand_quantized_weights_in_onnxruntime(bits):
    model = small_cnn()
    reference = onnx.ModelProto()
    reference.CopyFrom(model)
    for init in reference.graph.initializer:
        if init.name in ("w1", "w2", "fc_w"):
            init.CopyFrom(numpy_helper.from_array(reference_dequantized(numpy_helper.to_array(init), bits),
                                                  init.name))
    graph = quantize(to_graph(model), QuantConfig(quant_type="WeightQuant", weight_bits=bits,
                                                  min_quant_weight_channel=0))
    feeds = samples_for((1, 3, 8, 8), 1)[0]
    ours, expected = run_buf(to_bytes(graph), feeds), run_ort(reference, feeds)
    np.testing.assert_allclose(ours["logits"], expected["logits"], rtol=1e-4, atol=1e-5)


def test_weight_only_stores_integer_weights_and_casts():
    graph = quantize(to_graph(small_cnn()), QuantConfig(quant_type="WeightQuant", weight_bits=12,
                                                        min_quant_weight_channel=0))
    casts = [n for n in graph.nodes if n.op == "QuantDTypeCast"]
    assert len(casts) == 3
    assert all(graph.values[n.inputs[0]].dtype == np.int16 and graph.values[n.inputs[0]].quant_params
               for n in casts)


def test_weight_only_skips_few_channels_and_small_kernels():
    graph = quantize(to_graph(small_cnn()), QuantConfig(quant_type="WeightQuant", min_quant_weight_channel=6,
                                                        min_quant_weight_size=100))
    quantized = {n.name for n in graph.nodes if n.op == "QuantDTypeCast"}
    assert len(quantized) == 1 and "conv2" in next(iter(quantized))    # conv1: 6 channels; fc: 32 weights


# ---- full quantization ------------------------------------------------------------------------------------------
def test_activation_params_cover_the_range_and_zero():
    p = activation_param(0.5, 3.0, 8)
    assert p.min == 0.0 and p.max == 3.0 and -128 <= p.zeroPoint <= 127
    assert p.zeroPoint == -128 and math.isclose(p.scale, 3.0 / 255)


def quantized_small_cnn(**cfg) -> tuple[Graph, list[dict[str, np.ndarray]]]:
    samples = samples_for((1, 3, 8, 8))
    return quantize(to_graph(small_cnn()), QuantConfig(preset=MINDSPORE_LITE, **cfg), samples), samples


def test_rewrite_puts_casts_at_int8_float_borders():
    graph, _ = quantized_small_cnn()
    for node in graph.nodes:
        ins = [graph.values[i].dtype for i in node.inputs[:1]]
        if node.op == "QuantDTypeCast":
            assert {ins[0], graph.values[node.outputs[0]].dtype} == {np.dtype(np.int8), np.dtype(np.float32)}
        elif node.op in ("Conv2D", "FullConnection", "Softmax"):
            assert ins == [np.int8] and graph.values[node.outputs[0]].dtype == np.int8
    assert graph.outputs == ["logits", "probs"]
    assert all(graph.values[o].dtype == np.float32 for o in graph.outputs + graph.inputs)


def test_weights_per_channel_and_bias_int32_with_product_scale():
    graph, _ = quantized_small_cnn()
    fc = next(n for n in graph.nodes if n.op == "FullConnection")
    x, w, b = (graph.values[i] for i in fc.inputs)
    assert w.dtype == np.int8 and len(w.quant_params) == 4 and w.quant_axis == 0
    assert b.dtype == np.int32
    np.testing.assert_allclose([p.scale for p in b.quant_params],
                               [x.quant_params[0].scale * p.scale for p in w.quant_params])


def test_graph_inputs_and_outputs_keep_8_bits_under_lower_activation_bits():
    graph, _ = quantized_small_cnn(activation_bits=4)
    fc = next(n for n in graph.nodes if n.op == "FullConnection")
    conv = next(n for n in graph.nodes if n.op == "Conv2D")
    assert graph.values[conv.inputs[0]].quant_params[0].numBits == 8         # the graph input `input`, cast
    assert graph.values[fc.outputs[0]].quant_params[0].numBits == 8          # feeds the output `logits`
    assert graph.values[conv.outputs[0]].quant_params[0].numBits == 4


def test_int8_inputs_and_outputs_on_request():
    graph, _ = quantized_small_cnn(input_data_type="INT8", output_data_type="INT8")
    assert graph.values["input"].dtype == np.int8 and graph.values["logits"].dtype == np.int8
    assert graph.values["probs"].dtype == np.int8           # the int8 softmax's output, asked for as INT8 too
    assert graph.values["input"].quant_params


def test_full_quant_model_stays_close_to_onnxruntime():
    graph, samples = quantized_small_cnn()
    buf = to_bytes(graph)
    for feeds in samples[:2]:
        ours, expected = run_buf(buf, feeds)["logits"], run_ort(small_cnn(), feeds)["logits"]
        assert np.abs(ours - expected).max() < 0.05 * np.abs(expected).max()


def _conv_pool_conv(pool: onnx.NodeProto, first_conv: bool) -> onnx.ModelProto:
    """[Conv ->] pool -> Conv, with the pool's extra outputs (MaxPool's indices) as graph outputs."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c"], pads=[1, 1, 1, 1])] if first_conv else []
    nodes += [pool, helper.make_node("Conv", ["p", "w2"], ["y"])]
    outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT if o == "y" else TensorProto.INT64, None)
               for o in ["y", *pool.output[1:]]]
    weights = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
               for n, s in (("w1", (3, 3, 3, 3)), ("w2", (2, 3, 1, 1)))]
    graph = onnx.helper.make_graph(nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                              [1, 3, 8, 8])],
                                   outputs, weights[int(not first_conv):])
    return onnx.helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("pool", ["MaxPool_indices", "LpPool", "GlobalLpPool"])
def test_pooling_without_an_int8_kernel_stays_float_between_casts(pool: str) -> None:
    """LP pooling and max pooling's indices have no int8 kernel: the node stays float, its neighbours int8;
    indices of a pool on the float input match onnxruntime exactly, outputs to int8 accuracy."""
    from onnx import helper
    node = {"MaxPool_indices": helper.make_node("MaxPool", ["input"], ["p", "i"],
                                                kernel_shape=[2, 2], strides=[2, 2]),
            "LpPool": helper.make_node("LpPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2], p=2),
            "GlobalLpPool": helper.make_node("GlobalLpPool", ["c"], ["p"], p=3)}[pool]
    model = _conv_pool_conv(node, first_conv=pool != "MaxPool_indices")
    samples = samples_for((1, 3, 8, 8))
    graph = quantize(to_graph(model), QuantConfig(method="MAX_MIN"), samples)
    pooling = next(n for n in graph.nodes if n.op == "Pooling")
    assert graph.values[pooling.inputs[0]].dtype == np.float32 and graph.values[pooling.outputs[0]].dtype == np.float32
    assert all(graph.values[n.inputs[0]].dtype == np.int8 for n in graph.nodes if n.op == "Conv2D")
    ours, expected = run_buf(to_bytes(graph), samples[0]), run_ort(model, samples[0])
    assert np.abs(ours["y"] - expected["y"]).max() < 0.05 * np.abs(expected["y"]).max()
    if "i" in expected:
        np.testing.assert_array_equal(ours["i"], expected["i"])


def test_bias_of_near_zero_weights_fits_int32_by_widening_the_weight_scale():
    w = np.stack([RNG.standard_normal(16), RNG.standard_normal(16) * 1e-9]).astype(np.float32)
    b = np.array([0.5, 3.0], np.float32)
    graph = full_quantize(fc_graph(w, b), {"x": (-1.0, 1.0), "y": (-8.0, 8.0)})
    fc = next(n for n in graph.nodes if n.op == "FullConnection")
    x_scale, bias = graph.values[fc.inputs[0]].quant_params[0].scale, graph.values[fc.inputs[2]]
    scales = np.array([p.scale for p in bias.quant_params])
    assert np.all(np.abs(bias.const * scales - b) <= scales / 2 * (1 + 1e-9))
    assert np.abs(bias.const).max() <= 2 ** 30 and x_scale > 0


# ---- bias correction ------------------------------------------------------------------------------------------
def fc_graph(w: np.ndarray, b: np.ndarray | None, op: str = "FullConnection") -> Graph:
    g = Graph("fc")
    g.values["x"] = Value("x", (1, w.shape[1]), np.dtype(np.float32))
    g.values["y"] = Value("y", (1, w.shape[0]), np.dtype(np.float32))
    g.inputs, g.outputs = ["x"], ["y"]
    weight = g.add_const(w if op == "FullConnection" else np.ascontiguousarray(w.T), "w")
    inputs = ["x", weight] + ([g.add_const(b, "b")] if b is not None else [])
    g.nodes = [Node(op, "fc", inputs, ["y"], {})]
    return g


@pytest.mark.parametrize("op, with_bias", [("FullConnection", True), ("MatMul", False)])
def test_bias_correction_is_the_mean_channel_error_by_hand(op, with_bias):
    w = RNG.standard_normal((3, 16)).astype(np.float32)
    b = RNG.standard_normal(3).astype(np.float32) if with_bias else None
    xs = [RNG.uniform(0, 2, (1, 16)).astype(np.float32) + 0.5 * k for k in range(8)]
    samples = [{"x": x} for x in xs]
    ys = np.concatenate([x @ w.T for x in xs])
    ranges = {"x": (min(x.min() for x in xs), max(x.max() for x in xs)), "y": (ys.min() - 8, ys.max() + 8)}
    float_graph = fc_graph(w, b, op)
    qgraph = full_quantize(fc_graph(w, b, op), ranges, 8, 3)
    corrections = correct_biases(float_graph, qgraph, samples)
    # by hand: the float output minus the output of the dequantized weights on the dequantized input
    xp = activation_param(*ranges["x"], 8)
    wq = reference_dequantized(w, 3)
    deq_x = [(np.clip(np.rint(x / xp.scale) + xp.zeroPoint, -128, 127) - xp.zeroPoint) * xp.scale for x in xs]
    expected = np.mean([x @ w.T - dx @ wq.T for x, dx in zip(xs, deq_x)], axis=0)[0]
    np.testing.assert_allclose(corrections["fc"], expected, rtol=1e-4, atol=1e-5)
    node = next(n for n in qgraph.nodes if n.name == "fc")
    assert node.op == "FullConnection" and qgraph.values[node.inputs[2]].dtype == np.int32


def test_bias_correction_reduces_error_of_low_bit_weights():
    samples = samples_for((1, 3, 8, 8), 8)
    errors = []
    for bc in (False, True):
        buf = to_bytes(quantize(to_graph(small_cnn()), QuantConfig(weight_bits=4, bias_correction=bc), samples))
        errors.append(np.mean([np.abs((run_buf(buf, s)["logits"] - run_ort(small_cnn(), s)["logits"]).mean(0))
                               for s in samples]))
    assert errors[1] < errors[0]



def test_checked_bias_correction_keeps_a_correction_that_helps(capsys):
    qgraph, samples = quantized_small_cnn(weight_bits=4)
    float_graph = to_graph(small_cnn())
    before = output_sqnr(float_graph, qgraph, samples)
    kept = correct_biases_if_better(float_graph, qgraph, samples)
    assert output_sqnr(float_graph, kept, samples) > before
    assert "applied" in capsys.readouterr().err


def test_checked_bias_correction_rejects_a_correction_that_hurts(monkeypatch, capsys):
    qgraph, samples = quantized_small_cnn(weight_bits=4)
    float_graph = to_graph(small_cnn())
    reference = to_bytes(qgraph)

    def wrong_correction(float_graph: Graph, graph: Graph, samples: list) -> None:
        for node in graph.nodes:
            if node.op == "Conv2D" and len(node.inputs) > 2 and node.inputs[2]:
                bias = graph.values[node.inputs[2]]
                bias.const = bias.const + np.int32(1 << 20)

    monkeypatch.setattr(bias_correction, "correct_biases", wrong_correction)
    kept = correct_biases_if_better(float_graph, qgraph, samples)
    assert to_bytes(kept) == reference
    assert "rejected" in capsys.readouterr().err


def test_output_sqnr_is_the_sqnr_of_the_model_outputs():
    qgraph, samples = quantized_small_cnn()
    float_graph = to_graph(small_cnn())
    agree = Agreement()
    for s in samples:
        expected, got = run_ort(small_cnn(), s), run_buf(to_bytes(qgraph), s)
        for name in ("logits", "probs"):
            agree.update(expected[name], got[name])
    assert math.isclose(output_sqnr(float_graph, qgraph, samples), agree.sqnr(), rel_tol=1e-4)

# ---- debug report -----------------------------------------------------------------------------------------------
def test_agreement_is_cosine_and_sqnr_over_all_samples():
    fs = [RNG.standard_normal(50) for _ in range(3)]
    qs = [f + RNG.standard_normal(50) * 0.1 for f in fs]
    agree = Agreement()
    for f, q in zip(fs, qs):
        agree.update(f, q)
    f, q = np.concatenate(fs), np.concatenate(qs)
    assert math.isclose(agree.cosine(), f @ q / np.linalg.norm(f) / np.linalg.norm(q), rel_tol=1e-9)
    assert math.isclose(agree.sqnr(), 10 * math.log10((f @ f) / ((f - q) @ (f - q))), rel_tol=1e-9)


def test_debug_report_lists_each_layer_in_json(tmp_path, capsys):
    path = tmp_path / "debug.json"
    quantized_small_cnn(debug_info_save_path=str(path))
    layers = {row["node"]: row for row in json.loads(path.read_text())["layers"]}
    assert layers["conv1"]["dtype"] == "int8" and layers["conv1"]["cosine"] > 0.99
    assert layers["softmax"]["dtype"] == "int8" and layers["softmax"]["cosine"] > 0.99
    assert "SQNR dB" in capsys.readouterr().out


def test_debug_table_prints_every_node_name_whole():
    """Names sharing a long prefix (the usual export naming) stay apart: no name is cut."""
    prefix = "model/features/block_12/expand_conv/" * 2
    rows = [{"node": prefix + tail, "op": "Conv2D", "dtype": "int8", "cosine": 0.99, "sqnr_db": 30.0}
            for tail in ("Conv2D", "Conv2D_1")]
    lines = format_report(rows).splitlines()
    assert [line.split()[-1] for line in lines[1:]] == [r["node"] for r in rows]
    assert "SQNR dB" in lines[0]


def test_debug_sensitivity_table_quantizes_one_layer_at_a_time(tmp_path, capsys):
    """Each weighted layer's row is the output SQNR with that layer alone quantized. With 3-bit weights their
    rounding dominates, so onnxruntime on the float model with only that layer's weights rounded by hand
    (per-channel symmetric; batch norm scales channels, so rounding before or after folding agrees) gives the
    same SQNR within the 8-bit activations' small share."""
    path = tmp_path / "debug.json"
    _, samples = quantized_small_cnn(debug_info_save_path=str(path), weight_bits=3)
    table = (tmp_path / "debug_sensitivity.md").read_text()
    rows = {line.split("|")[2].strip().split(" ")[0]: float(line.split("|")[4]) for line in table.splitlines()[2:]}
    assert set(rows) == {"conv1", "conv2", "fc"}
    model = small_cnn()
    reference = [run_ort(model, x) for x in samples]
    for layer, weight in (("conv1", "w1"), ("conv2", "w2"), ("fc", "fc_w")):
        rounded = onnx.ModelProto()
        rounded.CopyFrom(model)
        init = next(i for i in rounded.graph.initializer if i.name == weight)
        init.CopyFrom(numpy_helper.from_array(reference_dequantized(numpy_helper.to_array(init), 3), weight))
        signal = noise = 0.0
        for ref, x in zip(reference, samples):
            out = run_ort(rounded, x)
            signal += sum(float(np.sum(ref[k].astype(np.float64) ** 2)) for k in ref)
            noise += sum(float(np.sum((ref[k].astype(np.float64) - out[k]) ** 2)) for k in ref)
        assert abs(rows[layer] - 10 * math.log10(signal / noise)) < 1.5, layer
    assert (tmp_path / "debug_sensitivity.png").read_bytes()[:4] == b"\x89PNG"
    assert "only this layer int8" in capsys.readouterr().out


def test_convert_quantized_reads_config_and_bin_calibration_files(tmp_path):
    (tmp_path / "calib").mkdir()
    for i, sample in enumerate(samples_for((1, 3, 8, 8), 3)):
        sample["input"].tofile(tmp_path / "calib" / f"{i}.bin")
    (tmp_path / "quant.cfg").write_text("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n"
                                        "[data_preprocess_param]\ncalibrate_path=input:calib\n"
                                        "[full_quant_param]\nactivation_quant_method=MAX_MIN\n")
    from converter.quant import convert_quantized
    buf = convert_quantized(small_cnn(), tmp_path / "quant.cfg")
    model = lite.Model.Import(buf)
    assert any(t.data_type == lite.DataType.INT8 for t in model.tensors)
    feeds = samples_for((1, 3, 8, 8), 1, seed=5)[0]
    assert run_buf(buf, feeds)["probs"].shape == (1, 4)


def test_flags_override_the_config_file(tmp_path):
    from converter.quant import make_config
    (tmp_path / "q.cfg").write_text("[common_quant_param]\nbit_num=6\n[full_quant_param]\nbias_correction=true\n")
    cfg = make_config(tmp_path / "q.cfg", weight_bits=7, quant_type=None)
    assert (cfg.activation_bits, cfg.weight_bits, cfg.bias_correction, cfg.quant_type) == (6, 7, True, "PostTraining")
