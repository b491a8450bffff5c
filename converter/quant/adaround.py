"""AdaRound (Nagel et al., "Up or Down? Adaptive Rounding for Post-Training Quantization", 2020) for the int8
Conv2D (plain and depthwise) and FullConnection weights of a quantized graph (`adaround=true`).

Each layer alone chooses, per weight, to round down or up (keeping the per-channel scales) so that its
pre-activation output on the calibration data, computed from its quantized input, is closest to the float
layer's output on the float input: min ||X W^T - X~ Wq^T||^2 with X the float layer's input patches (im2col) and
X~ their quantize-dequantize. The loss and its gradient need only the Gram matrices X~^T X~ and X~^T X
(K x K, K = the patch size), accumulated over up to ROWS sampled output positions, so the `iterations` Adam
steps on the rounding variables V cost O(out * K^2) each. h(V) = clip(sigmoid(V) (zeta - gamma) + gamma, 0, 1)
starts at each weight's fractional part; the regularizer lambda * sum(1 - |2h - 1|^beta), beta annealed from 20
to 2 after a 20 % warm-up, drives h to 0 or 1, which is the rounding kept.
"""
from __future__ import annotations


import numpy as np

from converter.ir import Graph, Node
from converter.quant.calibration import progress, run_samples, session_for
from converter.quant.qparams import dequantize_tensor, quantize_tensor
from converter.quant.weights import weight_range

ZETA, GAMMA = 1.1, -0.1
ROWS = 2048                  # sampled output positions per layer over the whole calibration set
ITERATIONS = 100
LEARNING_RATE = 0.05
REGULARIZATION = 30.0        # few iterations need a strong pull to 0 or 1 (docs/quantization.md)
WARMUP = 0.2
BETA = (20.0, 2.0)


def _depthwise(node: Node) -> bool:
    a = node.attrs
    return node.op == "Conv2D" and a.get("group", 1) > 1 and a.get("group") == a.get("in_channel") == a.get(
        "out_channel")


def roundable(qgraph: Graph, node: Node) -> bool:
    """An int8 Conv2D (plain, depthwise; explicit pads) or FullConnection with an int8 constant weight."""
    if node.op not in ("Conv2D", "FullConnection") or qgraph.values[node.outputs[0]].dtype != np.int8:
        return False
    if node.op == "Conv2D" and (node.attrs.get("pad_mode", 0) != 0 or not (
            node.attrs.get("group", 1) == 1 or _depthwise(node))):
        return False
    w = qgraph.values[node.inputs[1]]
    return w.const is not None and w.const.dtype == np.int8 and w.quant_axis == 0


def patches(x: np.ndarray, node: Node, kernel: tuple[int, int], rows: np.ndarray) -> np.ndarray:
    """The layer's input patches at output positions `rows` (flat over N, H_out, W_out), ordered (kh, kw, c)
    as an OHWI weight's K axis: [len(rows), kh, kw, C]. FullConnection: the rows of x over its last axis."""
    if node.op == "FullConnection":
        return x.reshape(-1, x.shape[-1])[rows]
    a = node.attrs
    kh, kw = kernel
    dh, dw, sh, sw = a.get("dilation_h", 1), a.get("dilation_w", 1), a.get("stride_h", 1), a.get("stride_w", 1)
    padded = np.pad(x, ((0, 0), (a.get("pad_top", 0), a.get("pad_bottom", 0)),
                        (a.get("pad_left", 0), a.get("pad_right", 0)), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
    windows = windows[:, ::sh, ::sw, :, ::dh, ::dw]                 # [N, Ho, Wo, C, kh, kw]
    flat = windows.reshape(-1, *windows.shape[3:])[rows]
    return flat.transpose(0, 2, 3, 1)


def output_positions(x_shape: tuple[int, ...], node: Node, kernel: tuple[int, int]) -> int:
    if node.op == "FullConnection":
        return int(np.prod(x_shape[:-1]))
    a = node.attrs
    kh, kw = kernel
    h = x_shape[1] + a.get("pad_top", 0) + a.get("pad_bottom", 0) - (kh - 1) * a.get("dilation_h", 1) - 1
    w = x_shape[2] + a.get("pad_left", 0) + a.get("pad_right", 0) - (kw - 1) * a.get("dilation_w", 1) - 1
    return x_shape[0] * (h // a.get("stride_h", 1) + 1) * (w // a.get("stride_w", 1) + 1)


class LayerStats:
    """Gram matrices of one layer over sampled rows: per channel [C, K, K] for depthwise, [K, K] otherwise."""

    def __init__(self, node: Node, weight_shape: tuple[int, ...], in_param, per_sample: int, seed: int):
        self.node, self.in_param, self.per_sample = node, in_param, per_sample
        self.depthwise = _depthwise(node)
        self.kernel = (weight_shape[1], weight_shape[2]) if node.op == "Conv2D" else (1, 1)
        self.rng = np.random.default_rng(seed)
        self.gram = self.cross = self.float_gram = None
        self.rows = 0

    def add(self, x: np.ndarray) -> None:
        total = output_positions(x.shape, self.node, self.kernel)
        rows = self.rng.choice(total, min(total, self.per_sample), replace=False)
        xq = dequantize_tensor(quantize_tensor(x, self.in_param), self.in_param)
        p = patches(x, self.node, self.kernel, rows).astype(np.float32)
        pq = patches(xq, self.node, self.kernel, rows).astype(np.float32)
        if self.depthwise:                              # [R, kh, kw, C] -> per channel [C, R, kh*kw]
            p, pq = (np.moveaxis(v, 3, 0).reshape(v.shape[3], len(rows), -1) for v in (p, pq))
        else:
            p, pq = p.reshape(len(rows), -1), pq.reshape(len(rows), -1)
        grams = [(a.swapaxes(-1, -2) @ b).astype(np.float64) for a, b in ((pq, pq), (pq, p), (p, p))]
        if self.gram is not None:
            grams = [old + new for old, new in zip((self.gram, self.cross, self.float_gram), grams)]
        self.gram, self.cross, self.float_gram = grams
        self.rows += len(rows)


def _h(v: np.ndarray) -> np.ndarray:
    return np.clip(1 / (1 + np.exp(-v)) * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def learn_rounding(w: np.ndarray, scales: np.ndarray, bits: int, gram: np.ndarray, cross: np.ndarray,
                   float_gram: np.ndarray, iterations: int = ITERATIONS) -> np.ndarray:
    """Integer weights [O, K] (or depthwise [C, 1, K] with per-channel [C, K, K] Grams) for float `w`, per-row
    `scales`, minimising the reconstruction error (module docstring): `gram` = X~^T X~, `cross` = X~^T X,
    `float_gram` = X^T X."""
    lo, hi = weight_range(bits)
    s = scales.reshape(-1, *([1] * (w.ndim - 1)))
    ratio = w / s
    floor = np.floor(ratio)
    frac = np.clip(ratio - floor, 1e-4, 1 - 1e-4)
    v = -np.log((ZETA - GAMMA) / (frac - GAMMA) - 1)                # h(v) = frac
    target = w @ cross.swapaxes(-1, -2)                             # W C^T, the float side of the gradient
    nearest = np.clip(np.rint(ratio), lo, hi) * s
    norm = max(float(np.sum(nearest * (nearest @ gram)) - 2 * np.sum(nearest * target)
                     + np.sum(w * (w @ float_gram))), 1e-30)          # nearest rounding's error
    gram32, target32 = gram.astype(np.float32), target.astype(np.float32)
    m, u = np.zeros_like(v), np.zeros_like(v)
    warm = int(WARMUP * iterations)
    for t in range(1, iterations + 1):
        sig = 1 / (1 + np.exp(-v))
        h = _h(v)
        q = floor + h
        inside = (q >= lo) & (q <= hi)
        grad_wq = 2 * ((np.clip(q, lo, hi) * s).astype(np.float32) @ gram32 - target32)
        grad_h = grad_wq * s * inside / norm
        if t > warm:
            beta = BETA[0] + (BETA[1] - BETA[0]) * (t - warm) / max(iterations - warm, 1)
            d = 2 * h - 1
            grad_h += REGULARIZATION * (-beta * np.abs(d) ** (beta - 1) * np.sign(d) * 2) / h.size
        grad = grad_h * (ZETA - GAMMA) * sig * (1 - sig) * ((h > 0) & (h < 1))
        m = 0.9 * m + 0.1 * grad
        u = 0.999 * u + 0.001 * grad ** 2
        v -= LEARNING_RATE * (m / (1 - 0.9 ** t)) / (np.sqrt(u / (1 - 0.999 ** t)) + 1e-8)
    return np.clip(floor + (v >= 0), lo, hi)


def adaround_weights(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]],
             iterations: int = ITERATIONS) -> int:
    """Learn the rounding of every `roundable` layer of `qgraph` (mutated: its integer weights change, the
    scales stay); layers are matched to the float graph by node name. Returns the number of layers."""
    float_nodes = {n.name: n for n in float_graph.nodes}
    layers = [n for n in qgraph.nodes if roundable(qgraph, n) and n.name in float_nodes]
    per_sample = -(-ROWS // max(len(samples), 1))
    stats = {n.name: LayerStats(n, qgraph.values[n.inputs[1]].const.shape,
                                qgraph.values[n.inputs[0]].quant_params[0], per_sample, i)
             for i, n in enumerate(layers)}
    by_input: dict[str, list[LayerStats]] = {}
    for n in layers:
        by_input.setdefault(float_nodes[n.name].inputs[0], []).append(stats[n.name])

    def visit(name: str, array: np.ndarray) -> None:
        for layer in by_input.get(name, ()):
            layer.add(array)

    run_samples(session_for(float_graph), samples, visit, "adaround statistics")
    for i, node in enumerate(layers, 1):
        fnode, layer, value = float_nodes[node.name], stats[node.name], qgraph.values[node.inputs[1]]
        w = float_graph.const(fnode.inputs[1]).astype(np.float64)
        scales = np.array([p.scale for p in value.quant_params], np.float64)
        bits = value.quant_params[0].numBits
        flat = w.reshape(w.shape[0], 1, -1) if layer.depthwise else w.reshape(w.shape[0], -1)
        q = learn_rounding(flat, scales, bits, layer.gram, layer.cross, layer.float_gram, iterations)
        value.const = q.reshape(value.const.shape).astype(np.int8)
        progress(i, len(layers), "adaround")
    return len(layers)
