"""Transformer ops beyond the official node tests: Attention with a constant mask (its bias built at compile
time) and a KV cache fed back over decode steps, LinearAttention over longer sequences and fed back chunk by
chunk, batched MatMul broadcasting, and the bad-input contract."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from converter import convert
from lite.status import InvalidOpAttrError, LiteError
from tests.lite.kernels.test_elementwise import check, model_of, one_node
from tests.util import assert_matches_oracles, run_lite, session_for

rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("mask_dtype", [np.float32, np.bool_])
def test_attention_with_a_constant_mask_and_gqa_matches_the_reference(mask_dtype: type) -> None:
    q, k, v = f32(2, 6, 5, 8), f32(2, 3, 7, 8), f32(2, 3, 7, 4)
    mask = rng.uniform(size=(6, 5, 6)) > 0.3 if mask_dtype == np.bool_ else f32(1, 6, 5, 7)
    model = one_node("Attention", {"q": q, "k": k, "v": v}, {"mask": mask}, opset=23, is_causal=0, softcap=3.0)
    assert_matches_oracles(model, {"q": q, "k": k, "v": v}, rtol=1e-4, atol=1e-5, oracles=("reference",))


def test_attention_kv_cache_fed_back_matches_the_reference_step_by_step() -> None:
    """Decode: each step's present_key / present_value is the next step's past (3-D q/k/v, causal)."""
    from onnx.reference import ReferenceEvaluator
    past = 3
    inputs = {"q": f32(1, 1, 16), "k": f32(1, 1, 8), "v": f32(1, 1, 8), "pk": f32(1, 2, past, 4),
              "pv": f32(1, 2, past, 4)}
    node = helper.make_node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "present_k", "present_v"],
                            q_num_heads=4, kv_num_heads=2, is_causal=1)
    models = [model_of([node], {**inputs, "pk": f32(1, 2, past + t, 4), "pv": f32(1, 2, past + t, 4)},
                       dict.fromkeys(["y", "present_k", "present_v"], np.float32), opset=23) for t in range(3)]
    feeds = dict(inputs)
    for model in models:
        ours = run_lite(session_for(model), feeds)
        want = dict(zip(["y", "present_k", "present_v"], ReferenceEvaluator(model).run(None, feeds)))
        for name, expected in want.items():
            np.testing.assert_allclose(ours[name], expected, rtol=1e-5, atol=1e-6, err_msg=name)
        feeds = {"q": f32(1, 1, 16), "k": f32(1, 1, 8), "v": f32(1, 1, 8), "pk": ours["present_k"],
                 "pv": ours["present_v"]}


@pytest.mark.parametrize("shapes", [((2, 1, 3, 4, 5), (3, 5, 6)), ((4, 5), (2, 3, 5, 2)), ((2, 3, 4), (4,))],
                         ids=str)
def test_batched_matmul_broadcasts_like_onnxruntime(shapes: tuple) -> None:
    a, b = f32(*shapes[0]), f32(*shapes[1])
    check(one_node("MatMul", {"a": a, "b": b}), {"a": a, "b": b}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs, shapes, message", [
    ({}, ((1, 4, 8), (1, 4, 8), (1, 4, 8)), "q_num_heads"),
    ({"q_num_heads": 3, "kv_num_heads": 2}, ((1, 4, 6), (1, 4, 4), (1, 4, 4)), "not a multiple"),
    ({}, ((1, 2, 4, 8), (1, 2, 5, 6), (1, 2, 5, 8)), "do not match"),
], ids=["3d-without-heads", "gqa-heads", "head-size"])
def test_attention_refuses_inconsistent_heads_naming_the_node(attrs: dict, shapes: tuple, message: str) -> None:
    inputs = {name: f32(*s) for name, s in zip("qkv", shapes)}
    with pytest.raises(LiteError, match=message):
        convert(one_node("Attention", inputs, opset=23, **attrs))


def test_attention_refuses_a_mask_that_does_not_broadcast() -> None:
    inputs = {"q": f32(1, 2, 4, 8), "k": f32(1, 2, 5, 8), "v": f32(1, 2, 5, 8)}
    with pytest.raises(LiteError, match="attn_mask"):
        convert(one_node("Attention", inputs, {"mask": f32(3, 4, 5)}, opset=23))


def test_rotary_embedding_refuses_an_odd_rotary_dim() -> None:
    inputs = {"x": f32(1, 2, 3, 8), "cos": f32(1, 3, 3), "sin": f32(1, 3, 3)}
    with pytest.raises(InvalidOpAttrError, match="rotary_embedding_dim"):
        convert(one_node("RotaryEmbedding", inputs, opset=23, rotary_embedding_dim=5))


_LINEAR_RULES = {"linear": (False, False), "gated": (True, False), "delta": (False, True),
                 "gated_delta": (True, True)}


def _linear_attention_inputs(rule: str, b: int, t: int, hq: int, hkv: int, dk: int, dv: int,
                             per_head: bool) -> dict[str, np.ndarray]:
    gated, delta = _LINEAR_RULES[rule]
    k = f32(b, t, hkv, dk)
    inputs = {"q": f32(b, t, hq * dk), "k": (k / np.linalg.norm(k, axis=-1, keepdims=True)).reshape(b, t, -1),
              "v": f32(b, t, hkv * dv), "past": f32(b, hkv, dk, dv)}
    if gated:
        inputs["decay"] = -rng.uniform(0.01, 0.5, (b, t, hkv if per_head else hkv * dk)).astype(np.float32)
    if delta:
        inputs["beta"] = rng.uniform(0.1, 0.9, (b, t, hkv)).astype(np.float32)
    return inputs


def _linear_attention_model(inputs: dict[str, np.ndarray], rule: str, hq: int, hkv: int):
    names = [n if n in inputs else "" for n in ("q", "k", "v", "past", "decay", "beta")]
    node = helper.make_node("LinearAttention", names, ["y", "present"], update_rule=rule, q_num_heads=hq,
                            kv_num_heads=hkv)
    return model_of([node], inputs, {"y": np.float32, "present": np.float32}, opset=27)


@pytest.mark.parametrize("rule", list(_LINEAR_RULES))
@pytest.mark.parametrize("heads, per_head", [((6, 2), True), ((4, 4), False)], ids=["gqa-per-head", "mha"])
def test_linear_attention_over_a_long_sequence_matches_the_reference(rule: str, heads: tuple, per_head: bool) -> None:
    hq, hkv = heads
    inputs = _linear_attention_inputs(rule, 3, 40, hq, hkv, 8, 5, per_head)
    assert_matches_oracles(_linear_attention_model(inputs, rule, hq, hkv), inputs, rtol=1e-4, atol=1e-5,
                           oracles=("reference",))


def test_linear_attention_state_fed_back_over_chunks_matches_one_pass_of_the_reference() -> None:
    """Streaming: each chunk's present_state is the next chunk's past_state; the outputs, concatenated, are the
    reference's outputs over the whole sequence, and the last state its final state."""
    from onnx.reference import ReferenceEvaluator
    whole = _linear_attention_inputs("gated_delta", 2, 12, 4, 2, 6, 6, per_head=False)
    want_y, want_state = ReferenceEvaluator(_linear_attention_model(whole, "gated_delta", 4, 2)).run(None, whole)
    chunk = {n: a[:, :3] if n != "past" else a for n, a in whole.items()}
    session = session_for(_linear_attention_model(chunk, "gated_delta", 4, 2))
    state, ys = whole["past"], []
    for start in range(0, 12, 3):
        got = run_lite(session, {**{n: a[:, start:start + 3] for n, a in whole.items() if n != "past"},
                                 "past": state})
        ys.append(got["y"])
        state = got["present"]
    np.testing.assert_allclose(np.concatenate(ys, axis=1), want_y, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(state, want_state, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("rule, drop, message", [
    ("gated", "decay", "needs decay"), ("linear", None, "linear takes no decay"), ("softmax", None, "update_rule")])
def test_linear_attention_refuses_inputs_that_break_its_rule_naming_the_node(rule: str, drop: str | None,
                                                                              message: str) -> None:
    inputs = {n: a for n, a in _linear_attention_inputs("gated_delta", 1, 4, 2, 2, 4, 4, True).items() if n != drop}
    with pytest.raises(InvalidOpAttrError, match=f"LinearAttention_0.*{message}"):
        convert(_linear_attention_model(inputs, rule, 2, 2))
