"""onnxruntime's com.microsoft contrib ops, one node each, against onnxruntime running the same node."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.util import run_lite, run_ort, session_for

MS = "com.microsoft"
RNG = np.random.default_rng(43)


def _normal(*shape: int, scale: float = 1.0) -> np.ndarray:
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def _ints(dtype: type, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def contrib_model(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
                  outputs: list[str], domain: str = MS, **attrs: Any) -> onnx.ModelProto:
    """One `op` node of `domain` reading `inputs` ("" for an omitted one), the graph inputs `feeds` and the
    initializers `consts`; outputs typed by ONNX shape inference left to onnxruntime (declared untyped)."""
    node = helper.make_node(op, inputs, outputs, domain=domain, **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in feeds.items()]
    graph = helper.make_graph([node], op, graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outputs if o],
                              [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])


def check(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
          outputs: list[str] | None = None, atol: float = 1e-5, quantum: bool = False, **attrs: Any) -> None:
    """Our outputs equal onnxruntime's within `atol` (floats) or one step (integer outputs, `quantum`)."""
    outputs = outputs or ["y"]
    model = contrib_model(op, feeds, consts, inputs, outputs, **attrs)
    want = run_ort(model, feeds)
    got = run_lite(session_for(model), feeds)
    for name in filter(None, outputs):
        w, g = want[name], got[name]
        assert g.shape == w.shape and g.dtype == w.dtype, name
        diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
        assert diff.max() <= (1 if quantum else atol), (name, float(diff.max()))


# ---- float contrib ops --------------------------------------------------------------------------------------------
def test_gelu_family():
    x, bias = _normal(2, 5, 8), _normal(8)
    check("Gelu", {"x": x}, {}, ["x"])
    check("BiasGelu", {"x": x}, {"b": bias}, ["x", "b"])
    check("FastGelu", {"x": x}, {"b": bias}, ["x", "b"])
    check("FastGelu", {"x": x}, {}, ["x"])
    check("QuickGelu", {"x": x}, {}, ["x"], alpha=1.5)


@pytest.mark.parametrize("with_bias, with_sum", [(False, False), (True, True)])
def test_skip_layer_normalization(with_bias, with_sum):
    x, skip = _normal(2, 6, 16), _normal(2, 6, 16)
    consts = {"gamma": _normal(16), "beta": _normal(16)} | ({"bias": _normal(16)} if with_bias else {})
    outputs = ["y", "", "", "sum"] if with_sum else ["y"]
    check("SkipLayerNormalization", {"x": x, "skip": skip}, consts,
          ["x", "skip", "gamma", "beta"] + (["bias"] if with_bias else []), outputs, atol=2e-5, epsilon=1e-5)


def test_skip_simplified_layer_normalization():
    x, skip = _normal(2, 6, 16), _normal(2, 6, 16)
    check("SkipSimplifiedLayerNormalization", {"x": x, "skip": skip}, {"gamma": _normal(16), "bias": _normal(16)},
          ["x", "skip", "gamma", "bias"], ["y", "", "", "sum"], atol=2e-5, epsilon=1e-6)


def test_layer_normalization_and_simplified_of_the_default_domain_before_opset_17():
    """onnxruntime defines both in the default domain from opset 1 (LayerNormalization before ONNX did)."""
    x = _normal(3, 4, 10)
    for op, consts, inputs in (("LayerNormalization", {"g": _normal(10), "b": _normal(10)}, ["x", "g", "b"]),
                               ("SimplifiedLayerNormalization", {"g": _normal(10)}, ["x", "g"])):
        model = contrib_model(op, {"x": x}, consts, inputs, ["y"], domain="", axis=-1, epsilon=1e-5)
        del model.opset_import[:]
        model.opset_import.append(helper.make_opsetid("", 16))
        got = run_lite(session_for(model), {"x": x})["y"]
        assert np.abs(got - run_ort(model, {"x": x})["y"]).max() <= 2e-5, op


def test_embed_layer_normalization():
    ids = RNG.integers(0, 20, (2, 7)).astype(np.int32)
    segments = RNG.integers(0, 2, (2, 7)).astype(np.int32)
    mask = np.array([[1] * 7, [1] * 4 + [0] * 3], np.int32)
    consts = {"word": _normal(20, 12), "position": _normal(7, 12), "segment": _normal(2, 12), "gamma": _normal(12),
              "beta": _normal(12)}
    check("EmbedLayerNormalization", {"ids": ids, "segments": segments, "mask": mask}, consts,
          ["ids", "segments", "word", "position", "segment", "gamma", "beta", "mask"], ["y", "mask_index"],
          atol=2e-5, epsilon=1e-12)


@pytest.mark.parametrize("activation, params", [("Relu", []), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.5]),
                                                ("HardSigmoid", [0.3, 0.4]), ("Sigmoid", [])])
def test_fused_conv(activation, params):
    x = _normal(1, 3, 9, 9)
    consts = {"w": _normal(4, 3, 3, 3, scale=0.3), "b": _normal(4)}
    params = {"activation_params": params} if params else {}
    check("FusedConv", {"x": x}, consts, ["x", "w", "b"], atol=2e-5, activation=activation, pads=[1, 1, 1, 1],
          strides=[2, 2], **params)


def test_fused_conv_with_sum_input():
    x, z = _normal(1, 2, 6, 6), _normal(1, 4, 6, 6)
    check("FusedConv", {"x": x, "z": z}, {"w": _normal(4, 2, 3, 3, scale=0.3), "b": _normal(4)},
          ["x", "w", "b", "z"], atol=2e-5, activation="Relu", pads=[1, 1, 1, 1])


def test_fused_gemm():
    check("FusedGemm", {"a": _normal(5, 8)}, {"b": _normal(6, 8), "c": _normal(6)}, ["a", "b", "c"], atol=2e-5,
          transB=1, alpha=0.5, beta=2.0, activation="LeakyRelu", activation_alpha=0.1)


@pytest.mark.parametrize("trans_a, trans_b, alpha", [(0, 0, 1.0), (1, 0, 0.25), (0, 1, 2.0), (1, 1, 1.0)])
def test_fused_matmul(trans_a, trans_b, alpha):
    a = _normal(2, 3, 4, 5) if not trans_a else _normal(2, 3, 5, 4)
    b = _normal(3, 5, 6) if not trans_b else _normal(3, 6, 5)
    check("FusedMatMul", {"a": a, "b": b}, {}, ["a", "b"], atol=2e-5, transA=trans_a, transB=trans_b, alpha=alpha)


@pytest.mark.parametrize("masked, unidirectional", [(False, 0), (True, 0), (False, 1)])
def test_attention(masked, unidirectional):
    x = _normal(2, 5, 16)
    feeds = {"x": x} | ({"mask": np.array([[1] * 5, [1, 1, 1, 0, 0]], np.int32)} if masked else {})
    check("Attention", feeds, {"w": _normal(16, 48, scale=0.3), "b": _normal(48)},
          ["x", "w", "b"] + (["mask"] if masked else []), atol=2e-5, num_heads=4, unidirectional=unidirectional)


def test_multi_head_attention():
    q, k, v = _normal(2, 4, 12), _normal(2, 6, 12), _normal(2, 6, 12)
    check("MultiHeadAttention", {"q": q, "k": k, "v": v}, {"bias": _normal(36)}, ["q", "k", "v", "bias"],
          atol=2e-5, num_heads=3)


@pytest.mark.parametrize("padded", [False, True])
def test_group_query_attention(padded):
    """A prompt of 5 tokens, 4 query heads over 2 key / value heads; padded: the second row's last two tokens
    are padding (compared where onnxruntime defines the output: the valid rows)."""
    batch, length, size = 2, 5, 8
    lengths = np.array([length, 3 if padded else length], np.int32)
    feeds = {"q": _normal(batch, length, 4 * size), "k": _normal(batch, length, 2 * size),
             "v": _normal(batch, length, 2 * size), "seqlens": lengths - 1,
             "total": np.array(length, np.int32)}
    model = contrib_model("GroupQueryAttention", feeds, {}, ["q", "k", "v", "", "", "seqlens", "total"],
                          ["y", "present_key", "present_value"], num_heads=4, kv_num_heads=2)
    want, got = run_ort(model, feeds), run_lite(session_for(model), feeds)
    for name in ("present_key", "present_value"):
        np.testing.assert_array_equal(got[name], want[name])
    for row, valid in enumerate(lengths):
        assert np.abs(got["y"][row, :valid] - want["y"][row, :valid]).max() <= 2e-5


ANGLES = np.arange(16)[:, None] / (10000 ** (np.arange(8) / 8))[None]


@pytest.mark.parametrize("steps, cache, seqlens, total", [
    (1, 5, [5, 3], 6),      # token generation: the rows' caches hold 5 and 3 positions, the buffer 5
    (1, 8, [5, 3], 6),      # a buffer longer than the total: present keeps its length, zeros after each row
    (3, 4, [6], 7)])        # a subsequent prompt of 3 tokens after 4 cached ones
@pytest.mark.parametrize("rotary", [None, 0, 1])
def test_group_query_attention_with_past_state(steps, cache, seqlens, total, rotary):
    """past_key / past_value [B, 2, cache, D], each row's past seqlens_k + 1 - steps positions; rotary: query and
    key rotated at their absolute positions (rotary_interleaved 0 or 1)."""
    heads, kv_heads, size, batch = 4, 2, 16, len(seqlens)
    feeds = {"q": _normal(batch, steps, heads * size), "k": _normal(batch, steps, kv_heads * size),
             "v": _normal(batch, steps, kv_heads * size), "pk": _normal(batch, kv_heads, cache, size),
             "pv": _normal(batch, kv_heads, cache, size), "seqlens": np.array(seqlens, np.int32),
             "total": np.array(total, np.int32)}
    consts, inputs, attrs = {}, ["q", "k", "v", "pk", "pv", "seqlens", "total"], {}
    if rotary is not None:
        consts = {"cos": np.cos(ANGLES).astype(np.float32), "sin": np.sin(ANGLES).astype(np.float32)}
        inputs += ["cos", "sin"]
        attrs = {"do_rotary": 1, "rotary_interleaved": rotary}
    model = contrib_model("GroupQueryAttention", feeds, consts, inputs, ["y", "present_key", "present_value"],
                          num_heads=heads, kv_num_heads=kv_heads, **attrs)
    want, got = run_ort(model, feeds), run_lite(session_for(model), feeds)
    for name in ("y", "present_key", "present_value"):
        assert got[name].shape == want[name].shape, name
        assert np.abs(got[name] - want[name]).max() <= 2e-6, name


def test_group_query_attention_decodes_token_by_token_in_one_session():
    """A decoder step with a symbolic past length, converted once: each step's present becomes the next step's
    past (the session re-plans for each new length), against onnxruntime fed its own presents."""
    heads, kv_heads, size = 4, 2, 16
    float_input = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n, shape in
                   (("q", [1, 1, heads * size]), ("k", [1, 1, kv_heads * size]), ("v", [1, 1, kv_heads * size]),
                    ("pk", [1, kv_heads, "past", size]), ("pv", [1, kv_heads, "past", size]))]
    int_input = [helper.make_tensor_value_info("seqlens", TensorProto.INT32, [1]),
                 helper.make_tensor_value_info("total", TensorProto.INT32, [])]
    node = helper.make_node("GroupQueryAttention", ["q", "k", "v", "pk", "pv", "seqlens", "total"],
                            ["y", "present_key", "present_value"], domain=MS, num_heads=heads, kv_num_heads=kv_heads)
    graph = helper.make_graph([node], "decode", float_input + int_input,
                              [helper.make_empty_tensor_value_info(o) for o in node.output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    session = session_for(model)
    ours = theirs = (_normal(1, kv_heads, 2, size), _normal(1, kv_heads, 2, size))
    for past in range(2, 6):
        feeds = {"q": _normal(1, 1, heads * size), "k": _normal(1, 1, kv_heads * size),
                 "v": _normal(1, 1, kv_heads * size), "seqlens": np.array([past], np.int32),
                 "total": np.array(past + 1, np.int32)}
        got = run_lite(session, feeds | dict(zip(("pk", "pv"), ours)))
        want = run_ort(model, feeds | dict(zip(("pk", "pv"), theirs)))
        assert np.abs(got["y"] - want["y"]).max() <= 2e-6
        for name in ("present_key", "present_value"):
            np.testing.assert_array_equal(got[name], want[name])
        ours = got["present_key"], got["present_value"]
        theirs = want["present_key"], want["present_value"]


def test_group_query_attention_rotary_prompt():
    """A prompt without past state, rotated at positions 0 .. S-1."""
    feeds = {"q": _normal(2, 4, 64), "k": _normal(2, 4, 32), "v": _normal(2, 4, 32),
             "seqlens": np.array([3, 3], np.int32), "total": np.array(4, np.int32)}
    check("GroupQueryAttention", feeds, {"cos": np.cos(ANGLES).astype(np.float32),
                                         "sin": np.sin(ANGLES).astype(np.float32)},
          ["q", "k", "v", "", "", "seqlens", "total", "cos", "sin"], ["y", "present_key", "present_value"],
          atol=2e-6, num_heads=4, kv_num_heads=2, do_rotary=1)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding(interleaved):
    x = _normal(2, 5, 16)              # [B, S, heads * 8]
    positions = RNG.integers(0, 10, (2, 5)).astype(np.int64)
    angles = np.arange(10)[:, None] / (10000 ** (np.arange(4) / 4))[None]
    check("RotaryEmbedding", {"x": x, "pos": positions},
          {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)},
          ["x", "pos", "cos", "sin"], atol=2e-5, interleaved=interleaved, num_heads=2)


@pytest.mark.parametrize("bits, with_zero_points", [(4, False), (4, True), (8, True)])
def test_matmul_nbits(bits, with_zero_points):
    k, n, block = 40, 6, 16
    blocks = -(-k // block)
    packed = _ints(np.uint8, n, blocks, block * bits // 8)
    consts = {"b": packed, "scales": _normal(n * blocks, scale=0.1), "bias": _normal(n)}
    inputs = ["a", "b", "scales"]
    if with_zero_points:
        consts["zp"] = _ints(np.uint8, n * -(-blocks * bits // 8))
        inputs.append("zp")
    else:
        inputs.append("")
    inputs += ["", "bias"]
    check("MatMulNBits", {"a": _normal(3, k)}, consts, inputs, atol=3e-5, K=k, N=n, bits=bits, block_size=block)


def run_ort_one_thread(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime on one thread: its DynamicQuantizeLSTM then quantizes each step's h over the whole batch (on
    more threads, per block of batch rows)."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.mark.parametrize("dtype, direction, per_column, lens", [
    (np.int8, "forward", True, None), (np.uint8, "bidirectional", False, None), (np.int8, "reverse", False, None),
    (np.uint8, "forward", True, [6, 6, 6]), (np.int8, "bidirectional", True, [6, 4, 6]),
    (np.uint8, "reverse", False, [2, 6, 5]), (np.int8, "forward", False, [3, 1, 5])])
def test_dynamic_quantize_lstm(dtype, direction, per_column, lens):
    """X and each step's h quantized to uint8 as onnxruntime does, integer products: within 1e-5 of the range
    (1.2e-2 when run on dequantized weights in float)."""
    seq, batch, size, hidden, d = 6, 3, 5, 4, 2 if direction == "bidirectional" else 1
    feeds = {"x": _normal(seq, batch, size)} | ({} if lens is None else {"lens": np.array(lens, np.int32)})
    params = (d, 4 * hidden) if per_column else (d,)
    zero = np.zeros(params, dtype) if dtype == np.int8 else np.full(params, 118, dtype)
    consts = {"w": _ints(dtype, d, size, 4 * hidden), "r": _ints(dtype, d, hidden, 4 * hidden),
              "b": _normal(d, 8 * hidden), "ws": np.abs(_normal(*params, scale=0.01)), "wz": zero,
              "rs": np.abs(_normal(*params, scale=0.01)), "rz": zero, "h0": _normal(d, batch, hidden)}
    inputs = ["x", "w", "r", "b", "" if lens is None else "lens", "h0", "", "", "ws", "wz", "rs", "rz"]
    model = contrib_model("DynamicQuantizeLSTM", feeds, consts, inputs, ["y", "h", "c"], hidden_size=hidden,
                          direction=direction)
    want, got = run_ort_one_thread(model, feeds), run_lite(session_for(model), feeds)
    for name in ("y", "h", "c"):
        assert got[name].shape == want[name].shape
        assert np.abs(got[name] - want[name]).max() <= 1e-5 * np.ptp(want[name]), name


# ---- quantized contrib ops (QOperator) ----------------------------------------------------------------------------
def _qparams(dtype: type, scale: float, zero_point: int) -> tuple[np.ndarray, np.ndarray]:
    return np.array(scale, np.float32), np.array(zero_point, dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_binary(op, dtype):
    a, b = _ints(dtype, 2, 3, 8), _ints(dtype, 8)
    (a_s, a_z), (b_s, b_z), (c_s, c_z) = _qparams(dtype, 0.05, 3), _qparams(dtype, 0.02, -2 if dtype == np.int8
                                                                             else 130), _qparams(dtype, 0.08, 7)
    check(op, {"a": a, "b": b}, {"as": a_s, "az": a_z, "bs": b_s, "bz": b_z, "cs": c_s, "cz": c_z},
          ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], quantum=True)


@pytest.mark.parametrize("op, attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}),
                                       ("QLinearSoftmax", {"axis": -1, "opset": 13}),
                                       ("QLinearGlobalAveragePool", {"channels_last": 0}),
                                       ("QLinearGlobalAveragePool", {"channels_last": 1}),
                                       ("QLinearAveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]})])
def test_qlinear_unary(op, attrs):
    x = _ints(np.uint8, 1, 4, 6, 6)
    (x_s, x_z), (y_s, y_z) = _qparams(np.uint8, 0.05, 128), _qparams(np.uint8, 1 / 256 if "Softmax" in op or
                                                                      "Sigmoid" in op else 0.04, 0 if "Softmax" in op
                                                                      or "Sigmoid" in op else 128)
    check(op, {"x": x}, {"xs": x_s, "xz": x_z, "ys": y_s, "yz": y_z}, ["x", "xs", "xz", "ys", "yz"], quantum=True,
          **attrs)


def test_qlinear_concat():
    a, b = _ints(np.uint8, 2, 3, 4), _ints(np.uint8, 2, 5, 4)
    consts = {"ys": np.array(0.1, np.float32), "yz": np.array(120, np.uint8), "as": np.array(0.05, np.float32),
              "az": np.array(128, np.uint8), "bs": np.array(0.2, np.float32), "bz": np.array(100, np.uint8)}
    check("QLinearConcat", {"a": a, "b": b}, consts, ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], quantum=True,
          axis=1)


@pytest.mark.parametrize("quantized_output, per_column", [(True, False), (False, True), (True, True)])
def test_qgemm(quantized_output, per_column):
    a, b = _ints(np.uint8, 5, 16), _ints(np.int8, 6, 16)
    consts = {"as": np.array(0.02, np.float32), "az": np.array(120, np.uint8), "b": b,
              "bs": np.abs(_normal(6, scale=0.01)) if per_column else np.array(0.01, np.float32),
              "bz": np.zeros(6 if per_column else (), np.int8), "c": _ints(np.int16, 6).astype(np.int32)}
    inputs = ["a", "as", "az", "b", "bs", "bz", "c"]
    if quantized_output:
        consts |= {"ys": np.array(0.2, np.float32), "yz": np.array(128, np.uint8)}
        inputs += ["ys", "yz"]
    check("QGemm", {"a": a}, consts, inputs, atol=1e-5, quantum=quantized_output, transB=1, alpha=1.0)


def test_matmul_integer_to_float():
    a, b = _ints(np.uint8, 2, 3, 16), _ints(np.int8, 16, 6)
    consts = {"b": b, "as": np.array(0.02, np.float32), "bs": np.abs(_normal(6, scale=0.01)),
              "az": np.array(120, np.uint8), "bz": np.zeros(6, np.int8), "bias": _normal(6)}
    check("MatMulIntegerToFloat", {"a": a}, consts, ["a", "b", "as", "bs", "az", "bz", "bias"], atol=1e-5)


def test_dynamic_quantize_matmul():
    consts = {"b": _ints(np.int8, 16, 6), "bs": np.abs(_normal(6, scale=0.01)), "bz": np.zeros(6, np.int8),
              "bias": _normal(6)}
    check("DynamicQuantizeMatMul", {"a": _normal(3, 16)}, consts, ["a", "b", "bs", "bz", "bias"], atol=1e-5)


@pytest.mark.parametrize("dtype", [np.uint16, np.int16, np.int8])
def test_contrib_quantize_dequantize_linear(dtype):
    """onnxruntime's quantizer writes its own Q / DQ for 16-bit types (UseQDQContribOps)."""
    scale, zero_point = np.array([0.01, 0.02, 0.05], np.float32), np.array([3, 9, 1], dtype)
    model = contrib_model("QuantizeLinear", {"x": _normal(2, 3, 4)}, {"s": scale, "z": zero_point},
                          ["x", "s", "z"], ["q"], axis=1)
    model.graph.node.append(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], domain=MS, axis=1))
    model.graph.output.append(helper.make_empty_tensor_value_info("y"))
    feeds = {"x": _normal(2, 3, 4) * 50}
    want, got = run_ort(model, feeds), run_lite(session_for(model), feeds)
    for name in ("q", "y"):
        assert got[name].dtype == want[name].dtype
        np.testing.assert_array_equal(got[name], want[name])


def test_unsupported_contrib_op_names_its_domain_and_opset():
    from converter import convert
    from lite.status import NotSupportedError
    model = contrib_model("Frobnicate", {"x": _normal(2)}, {}, ["x"], ["y"], domain="com.acme")
    model.opset_import.append(helper.make_opsetid("com.acme", 3))
    with pytest.raises(NotSupportedError, match=r"'com\.acme\.Frobnicate' at node .*\(com\.acme opset 3\)"):
        convert(model)
