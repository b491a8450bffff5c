"""Gradient kernels of the transformer ops, driven as a compiled plan drives them and checked against PyTorch
autograd in float64: AttentionGrad (from the training forward's saved probabilities; multi-head, grouped-query,
3-D, softcapped, causal with a mask), RMSNormGrad, and GELU_TANH's ActivationGrad."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from schema import fb
from tests.lite.kernels.grad.test_nn import TOL, f32, run_op
from tests.oracles.torch_autograd import autograd, rel, t64

A = fb.ActivationType


def torch_attention(q, k, v, heads: tuple[int, int] | None, scale: float, softcap: float = 0.0,
                    bias: np.ndarray | None = None):
    """The ONNX Attention equations in PyTorch: 3-D inputs split into heads, key/value heads repeated per group."""
    def split(x, h):
        return x.reshape(x.shape[0], x.shape[1], h, -1).transpose(1, 2) if heads else x
    hq, hkv = heads or (q.shape[1], k.shape[1])
    q4, k4, v4 = split(q, hq), split(k, hkv), split(v, hkv)
    k4, v4 = k4.repeat_interleave(hq // hkv, 1), v4.repeat_interleave(hq // hkv, 1)
    s = q4 @ k4.transpose(-1, -2) * scale
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    if bias is not None:
        s = s + torch.tensor(bias, dtype=s.dtype)
    y = torch.softmax(s, -1) @ v4
    return y.transpose(1, 2).reshape(y.shape[0], y.shape[2], -1) if heads else y


CASES = {
    "mha": ((2, 4, 5, 8), (2, 4, 6, 8), (2, 4, 6, 3), {}),
    "gqa": ((2, 6, 5, 8), (2, 2, 6, 8), (2, 2, 6, 4), {}),
    "3d": ((2, 5, 12), (2, 6, 6), (2, 6, 9), {"q_num_heads": 6, "kv_num_heads": 3}),
    "softcap": ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), {"softcap": 1.5, "scale": 0.7}),
    "causal": ((1, 2, 5, 4), (1, 2, 5, 4), (1, 2, 5, 4), {"is_causal": True}),
}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_attention_grad_matches_autograd(case: str) -> None:
    q_shape, k_shape, v_shape, attrs = CASES[case]
    q, k, v = f32(*q_shape), f32(*k_shape), f32(*v_shape)
    mask = (np.arange(5)[None, :] <= np.arange(5)[:, None] + 1) if case == "causal" else None
    inputs = [q, k, v] + ([mask] if mask is not None else [])
    y, probs = run_op("Attention", inputs, 2, {**attrs, "training": True})
    heads = (attrs["q_num_heads"], attrs["kv_num_heads"]) if "q_num_heads" in attrs else None
    head = q_shape[-1] // (heads[0] if heads else 1)
    scale = attrs.get("scale", 1 / np.sqrt(head))
    bias = None
    if case == "causal":       # the causal limit and the mask, as one additive bias
        allowed = (np.arange(5)[None, :] <= np.arange(5)[:, None]) & mask
        bias = np.where(allowed, 0.0, -np.inf)

    def fn(*xs):
        return torch_attention(*xs, heads, scale, attrs.get("softcap", 0.0), bias)
    with torch.no_grad():
        assert rel(y, fn(*(t64(x, False) for x in (q, k, v)))) < TOL
    dy = f32(*y.shape)
    grads = run_op("AttentionGrad", [dy, q, k, v, probs], 3, attrs)
    for ours, want, name in zip(grads, autograd(fn, dy, q, k, v), "qkv"):
        assert rel(ours, want) < TOL, name


@pytest.mark.parametrize("axis, scale_shape", [(-1, (8,)), (1, (3, 8)), (1, (1, 8))], ids=str)
def test_rms_norm_and_its_grad_match_autograd(axis: int, scale_shape: tuple[int, ...]) -> None:
    x, scale = f32(2, 3, 8), f32(*scale_shape, low=0.5, high=1.5)
    eps = 1e-5
    y, invrms = run_op("RMSNorm", [x, scale], 2, {"axis": axis, "epsilon": eps})
    axes = tuple(range(axis % 3, 3))

    def fn(x_, s_):
        return x_ * torch.rsqrt(x_.pow(2).mean(axes, keepdim=True) + eps) * s_
    with torch.no_grad():
        assert rel(y, fn(t64(x, False), t64(scale, False))) < TOL
    dy = f32(*x.shape)
    dx, dscale = run_op("RMSNormGrad", [dy, x, scale, invrms], 2, {"axis": axis, "epsilon": eps})
    want_dx, want_dscale = autograd(fn, dy, x, scale)
    assert rel(dx, want_dx) < TOL and rel(dscale, want_dscale) < TOL


def test_tanh_gelu_and_its_grad_match_autograd() -> None:
    x = f32(4, 7, low=-4, high=4)
    (y,) = run_op("Activation", [x], 1, {"type": A.GELU_TANH})
    fn = lambda t: F.gelu(t, approximate="tanh")       # noqa: E731
    with torch.no_grad():
        assert rel(y, fn(t64(x, False))) < TOL
    dy = f32(*x.shape)
    (dx,) = run_op("ActivationGrad", [dy, x], 1, {"type": A.GELU_TANH})
    assert rel(dx, autograd(fn, dy, x)[0]) < TOL
