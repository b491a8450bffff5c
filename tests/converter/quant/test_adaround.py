"""AdaRound's depthwise objective against an independent reference: a depthwise convolution written out as loops
over output positions (zero padding, stride), at a per-channel 4-bit grid."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from converter.ir import Node
from converter.quant.adaround import LayerStats, Reconstruction, learn_rounding
from converter.quant.weights import channel_scales, weight_range

CHANNELS, KERNEL, SIZE, STRIDE = 6, 3, 10, 2
PADS = {"pad_top": 0, "pad_bottom": 1, "pad_left": 0, "pad_right": 1}     # TF "SAME" at stride 2: after only


def reference_patches(x: np.ndarray) -> np.ndarray:
    """x: NHWC -> float64 [N * H_out * W_out, kh * kw, C]: each output position's window, cut one at a time."""
    x = np.pad(x.astype(np.float64), ((0, 0), (PADS["pad_top"], PADS["pad_bottom"]),
                                      (PADS["pad_left"], PADS["pad_right"]), (0, 0)))
    n, h, wd, c = x.shape
    rows = []
    for b, i, j in itertools.product(range(n), range((h - KERNEL) // STRIDE + 1), range((wd - KERNEL) // STRIDE + 1)):
        rows.append(x[b, i * STRIDE:i * STRIDE + KERNEL, j * STRIDE:j * STRIDE + KERNEL].reshape(-1, c))
    return np.stack(rows)


@pytest.fixture(scope="module")
def layer():
    """A depthwise layer's float inputs, the dequantized inputs the int8 layer reads (8-bit grid), float
    weights and their 4-bit per-channel scales, and AdaRound's sums over every output position."""
    rng = np.random.default_rng(46)
    x = [np.maximum(rng.standard_normal((1, SIZE, SIZE, CHANNELS)), 0).astype(np.float32) for _ in range(3)]
    xq = [(np.rint(v * 40) / 40).astype(np.float32) for v in x]
    w = (rng.standard_normal((CHANNELS, KERNEL, KERNEL)) * rng.uniform(0.2, 2, (CHANNELS, 1, 1))).astype(np.float32)
    node = Node("Conv2D", "dw", ["x", "w"], ["y"], {"group": CHANNELS, "in_channel": CHANNELS,
                                                  "out_channel": CHANNELS, "stride_h": STRIDE,
                                                  "stride_w": STRIDE, **PADS})
    stats = LayerStats(node, w.reshape(CHANNELS, 1, -1), per_sample=SIZE * SIZE, seed=0)
    for a, b in zip(x, xq):
        stats.add(a, b, (CHANNELS, KERNEL, KERNEL, 1))
    scales = channel_scales(w.reshape(CHANNELS, -1), 0, 4)
    p, pq = (np.concatenate([reference_patches(v) for v in vs]) for vs in (x, xq))
    return p, pq, w, scales, stats.reconstruction()


def channel_errors(layer, q: np.ndarray) -> np.ndarray:
    """Each channel's ||conv(X, W) - conv(X~, q s)||^2 over every output position, from the cut windows; q:
    [C, 1, K], or [C, choices, K] to price many roundings at once ([C, choices])."""
    p, pq, w, scales, _ = layer
    y = np.einsum("rkc,ck->cr", p, w.reshape(CHANNELS, -1).astype(np.float64))
    yq = np.einsum("rkc,cnk->cnr", pq, q * scales[:, None, None])
    return np.sum((y[:, None] - yq) ** 2, axis=-1)


def reference_error(layer, q: np.ndarray) -> float:
    return float(channel_errors(layer, q).sum())


def test_depthwise_sums_give_the_convolution_error_of_every_rounding(layer):
    """The sums (G per channel, the float side T from X W^T, E) price nearest, floor, ceiling and random up/down
    roundings on the 4-bit grid as the explicit convolution does: per-channel grouping, the (kh, kw) order of
    the patch, the padding after the input and the stride all enter."""
    _, _, w, scales, recon = layer
    lo, hi = weight_range(4)
    ratio = w.reshape(CHANNELS, 1, -1) / scales[:, None, None]
    rng = np.random.default_rng(1)
    for q in (np.rint(ratio), np.floor(ratio), np.ceil(ratio), np.floor(ratio) + rng.integers(0, 2, ratio.shape)):
        q = np.clip(q, lo, hi)
        expected = reference_error(layer, q)          # within the float32 sums' precision of E = ||X W^T||^2
        assert recon.error(q * scales[:, None, None]) == pytest.approx(expected, abs=1e-6 * recon.energy)
        assert expected > 1e-3 * recon.energy


def test_depthwise_adaround_reaches_the_brute_force_optimum_at_4_bits(layer):
    """Each 3x3 channel has 512 up/down choices: the learnt rounding's error (priced from the cut windows) is within 2 %
    of the best of them and below nearest rounding's, and it is what float64 sums of the same rows give."""
    p, pq, w, scales, recon = layer
    lo, hi = weight_range(4)
    flat = w.reshape(CHANNELS, 1, -1)
    floor = np.floor(flat / scales[:, None, None])
    learnt = learn_rounding(flat, scales, 4, recon, 3000)
    assert np.all((learnt == np.clip(floor, lo, hi)) | (learnt == np.clip(floor + 1, lo, hi)))
    choices = np.clip(floor + np.array(list(itertools.product((0, 1), repeat=KERNEL * KERNEL))), lo, hi)
    optimum = channel_errors(layer, choices).min(axis=1).sum()
    nearest = np.clip(np.rint(flat / scales[:, None, None]), lo, hi)
    assert reference_error(layer, learnt) <= 1.02 * optimum
    assert reference_error(layer, learnt) < 0.9 * reference_error(layer, nearest)
    y = np.einsum("rkc,ck->cr", p, flat[:, 0].astype(np.float64))
    exact = Reconstruction(np.einsum("cr,rkc->ck", y, pq)[:, None], float(np.sum(y ** 2)),
                           np.einsum("rkc,rlc->ckl", pq, pq))            # float64 sums of the cut windows
    assert np.array_equal(learnt, learn_rounding(flat, scales, 4, exact, 3000))
