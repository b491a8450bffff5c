"""AdaRound (Nagel et al., "Up or Down? Adaptive Rounding for Post-Training Quantization", 2020) for the int8
Conv2D (plain and depthwise) and FullConnection weights of a quantized graph (`adaround=true`).

Each layer in turn chooses, per weight, to round down or up (keeping the per-channel scales) so that its
pre-activation output on the calibration data, computed from its input in the quantized network, is closest
to the float layer's output on the float input: min ||X W^T - X~ Wq^T||^2 with X the float layer's input
patches (im2col) and X~ the dequantized patches the int8 layer reads, with every earlier layer's rounding
already learnt, so each layer also absorbs what the layers before it could not (sequential, asymmetric
reconstruction; patches of the float input's fake-quantization instead gave EfficientNet-Lite0 A8W4 -1.3 dB,
this 4.8 dB). The loss and its gradient need only the Gram matrix X~^T X~ (K x K, K = the patch size) and
the float side W X^T X~, accumulated over up to ROWS sampled output positions, so the Adam steps on the
rounding variables V cost O(out * K^2) each; a layer with fewer sampled rows R than K / 2 keeps the rows
instead, O(out * K * R) (Reconstruction). The steps run in float32 with BLAS at one thread (the products
take milliseconds, and a second OpenBLAS thread spinning for a busy core made them 4-8x slower at load 11). A
layer gets `iterations` steps, and a layer whose steps are cheap more of them (`steps_for`). The layers' inputs
come from stepping both graphs over the calibration set stretch by stretch (`Stepper`).
h(V) = clip(sigmoid(V) (zeta - gamma) + gamma, 0, 1) starts at each weight's fractional part; the regularizer
lambda * sum(1 - |2h - 1|^beta), beta annealed from 20 to 2 after a 20 % warm-up, drives h to 0 or 1, which is
the rounding kept.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from converter.ir import Graph, Node
from converter.passes.fuse_residual import require_split
from converter.passes.layers import dense_or_depthwise, depthwise
from converter.quant.calibration import feed, session_for
from converter.quant.progress import Progress
from converter.quant.weights import weight_range
from lite.kernels._conv_math import PadMode, Window, make_window
from lite.kernels._conv_math import patches as window_patches
from lite.threads import thread_limit

ZETA, GAMMA = 1.1, -0.1
ROWS = 2048                  # sampled output positions per layer over the whole calibration set
FOLD = 1 << 21               # sampled values (rows x patch size) kept before they are folded into Gram matrices
ITERATIONS = 100             # steps of the costliest layers (`adaround_iterations`)
STEP_BUDGET = 1e6            # multiply-adds of a step under which a layer gets more steps ...
MAX_STEP_SCALE = 30          # ... up to this many times ITERATIONS
LEARNING_RATE = 0.05
REGULARIZATION = 30.0        # few iterations need a strong pull to 0 or 1 (docs/quantization.md)
WARMUP = 0.2
BETA = (20.0, 2.0)
STEP_PASSES = 40             # elementwise passes over the weights per Adam step (for the time estimate) ...
STEP_CALLS = 4e-5            # ... and seconds of the step's ~40 numpy calls themselves
PATCH_PASSES = 30            # elementwise passes over each sampled patch value (cutting, copies, casts)


def roundable(qgraph: Graph, node: Node) -> bool:
    """An int8 dense or depthwise linear layer (Conv2D with explicit pads, FullConnection) with an int8
    constant weight."""
    if not dense_or_depthwise(node) or node.attrs.get("pad_mode", PadMode.PAD) != PadMode.PAD:
        return False
    if qgraph.values[node.outputs[0]].dtype != np.int8:
        return False
    w = qgraph.values[node.inputs[1]]
    return w.const is not None and w.const.dtype == np.int8 and w.quant_axis == 0


Windows = tuple[Window, Window] | None      # a conv's sliding windows along H and W; None: a FullConnection


def windows(x_shape: tuple[int, ...], node: Node, weight_shape: tuple[int, ...]) -> Windows:
    """The windows of a layer reading NHWC `x_shape` through an OHWI weight; None for an [out, in] weight."""
    if len(weight_shape) != 4:
        return None
    a = node.attrs
    return (make_window(x_shape[1], weight_shape[1], a.get("stride_h", 1), a.get("dilation_h", 1), PadMode.PAD,
                        a.get("pad_top", 0), a.get("pad_bottom", 0)),
            make_window(x_shape[2], weight_shape[2], a.get("stride_w", 1), a.get("dilation_w", 1), PadMode.PAD,
                        a.get("pad_left", 0), a.get("pad_right", 0)))


def output_positions(x_shape: tuple[int, ...], wins: Windows) -> int:
    """Rows of the layer's im2col matrix: N * H_out * W_out, or every row of a FullConnection's input."""
    return int(np.prod(x_shape[:-1])) if wins is None else x_shape[0] * wins[0].out * wins[1].out


def patches(x: np.ndarray, wins: Windows, rows: np.ndarray) -> np.ndarray:
    """The layer's input patches at output positions `rows` (flat over N, H_out, W_out), ordered (kh, kw, c)
    as an OHWI weight's K axis: [len(rows), kh, kw, C] (the runtime's im2col view, only the rows copied).
    Without windows (FullConnection): the rows of x over its last axis."""
    if wins is None:
        return x.reshape(-1, x.shape[-1])[rows]
    wh, ww = wins
    padded = np.pad(x, ((0, 0), (wh.pad_begin, wh.pad_end), (ww.pad_begin, ww.pad_end), (0, 0)))
    view = window_patches(padded, wh, ww)                           # [N, H_out, W_out, kh, kw, C]
    return view[np.unravel_index(rows, view.shape[:3])]


class Stepper:
    """Runs a graph over the calibration samples stretch by stretch, in graph order: `advance(node)` runs the
    nodes not yet run that precede `node` and returns every sample's value of `node`'s input (dequantized when
    it is an integer tensor). Each stretch is its own small session, built when it is first run (so a layer
    whose rounding was just learnt runs with it), and between stretches each sample keeps only the tensors
    that a later node or a pending `targets` node reads. Every node runs once per sample: running each layer's
    whole prefix again, in a session rebuilt per layer, was O(layers^2) (docs/quantization.md)."""

    def __init__(self, graph: Graph, samples: list[dict[str, np.ndarray]], targets: list[Node]):
        self.graph, self.order, self.done = graph, graph.topological(), 0
        self.pending = [n.inputs[0] for n in targets]
        self.live = [dict(sample) for sample in samples]

    def advance(self, node: Node) -> list[np.ndarray]:
        name = node.inputs[0]
        self.pending.remove(name)
        stop = next(k for k, n in enumerate(self.order) if n is node)
        if stop > self.done:
            keep = {i for n in self.order[stop:] for i in n.inputs} | set(self.pending) | {name}
            self._run(self.order[self.done:stop], keep)
            self.done = stop
        return [self._real(live[name], name) for live in self.live]

    def _run(self, stretch: list[Node], keep: set[str]) -> None:
        g = Graph(f"{stretch[0].name}_stretch")
        g.values = {v: self.graph.values[v] for n in stretch for v in (*n.inputs, *n.outputs) if v}
        g.nodes = stretch
        g.inputs = sorted({i for n in stretch for i in n.inputs if i in self.live[0]})
        g.outputs = sorted({o for n in stretch for o in n.outputs if o in keep})
        session = session_for(g) if g.outputs else None
        for live in self.live:
            if session is not None:
                feed(session, {k: live[k] for k in g.inputs})
                session.RunGraph()
                live.update({k: session.GetOutputByTensorName(k).numpy().copy() for k in g.outputs})
            for k in [k for k in live if k not in keep]:
                del live[k]

    def _real(self, array: np.ndarray, name: str) -> np.ndarray:
        if array.dtype == np.float32:
            return array
        p = self.graph.values[name].quant_params[0]
        return (array.astype(np.float32) - np.float32(p.zeroPoint)) * np.float32(p.scale)


class Reconstruction:
    """A layer's squared output error ||X W^T - X~ Wq^T||^2 as a function of its weights Wq, for the float
    weights W it was built for: <Wq G, Wq> - 2 <Wq, T> + E, with G = X~^T X~ ([K, K], or per channel [C, K, K]
    for depthwise), the float side T = W X^T X~ and E = ||X W^T||^2. G is kept as whichever form is cheaper to
    multiply by: the rows X~ themselves while there are fewer than K / 2 of them (EfficientNet-Lite0's
    classifier sees one row per calibration image: K = 1280; the error then comes from the rows, with the float
    outputs X W^T), else the matrix."""

    def __init__(self, target: np.ndarray, energy: float = 0.0, gram: np.ndarray | None = None,
                 rows: np.ndarray | None = None, outputs: np.ndarray | None = None):
        self.exact_target, self.energy, self.rows, self.outputs = target, energy, rows, outputs
        self.target = target.astype(np.float32)                               # the steps' operands
        self.exact_gram, self.gram = gram, None if gram is None else gram.astype(np.float32)

    @classmethod
    def from_rows(cls, xq: np.ndarray, x: np.ndarray, w: np.ndarray) -> Reconstruction:
        """From the rows X~, X ([R, K]) and the float weights W ([O, K])."""
        return cls(((w @ x.T) @ xq).astype(np.float32), rows=xq,
                   outputs=w.astype(np.float64) @ x.astype(np.float64).T)

    @classmethod
    def from_grams(cls, gram: np.ndarray, cross: np.ndarray, float_gram: np.ndarray,
                   w: np.ndarray) -> Reconstruction:
        """From G, C = X~^T X and F = X^T X, and the float weights W: T = W C^T, E = <W F, W>."""
        w = w.astype(np.float64)
        return cls(w @ cross.swapaxes(-1, -2), float(np.sum(w * (w @ float_gram))), gram)

    def times_gram(self, wq: np.ndarray) -> np.ndarray:
        """Wq G, in float32 for float32 `wq`."""
        if self.rows is not None:
            return (wq @ self.rows.T) @ self.rows
        return wq @ self.gram

    def step_cost(self, w_shape: tuple[int, ...]) -> int:
        return step_cost(w_shape, None if self.rows is None else len(self.rows))

    def error(self, wq: np.ndarray) -> float:
        """The squared output error of the weights `wq` (float64: a small difference of large terms)."""
        if self.rows is not None:
            return float(np.sum((wq @ self.rows.astype(np.float64).T - self.outputs) ** 2))
        wq = wq.astype(np.float64)
        return float(np.sum(wq * (wq @ self.exact_gram)) - 2 * np.sum(wq * self.exact_target) + self.energy)


class LayerStats:
    """One layer's sampled input rows over the calibration set, folded into sums once they outnumber half the
    patch size K (Reconstruction), in blocks of up to FOLD values (few large products instead of one small one
    per sample). The sums are G and either, for a layer with fewer outputs than K (depthwise channels have
    one), T and E straight from the float outputs X W^T, or else C = X~^T X and F = X^T X (O K against K^2
    multiply-adds per row)."""

    def __init__(self, node: Node, w: np.ndarray, per_sample: int, seed: int):
        self.node, self.w, self.per_sample = node, w, per_sample      # w: [O, K], or depthwise [C, 1, K]
        self.depthwise, self.direct = depthwise(node), w.shape[-2] < w.shape[-1]
        self.rng = np.random.default_rng(seed)
        self.kept: list[tuple[np.ndarray, np.ndarray]] = []       # (X~, X) row blocks, before any sum
        self.sums: list | None = None

    def add(self, x: np.ndarray, xq: np.ndarray, weight_shape: tuple[int, ...]) -> None:
        """One sample's float input `x` and the quantized network's dequantized input `xq` to the layer (whose
        weight has `weight_shape`)."""
        wins = windows(x.shape, self.node, weight_shape)
        total = output_positions(x.shape, wins)
        rows = self.rng.choice(total, min(total, self.per_sample), replace=False)
        p, pq = (patches(v, wins, rows).astype(np.float32) for v in (x, xq))
        if self.depthwise:                              # [R, kh, kw, C] -> per channel [C, R, kh*kw]
            p, pq = (np.moveaxis(v, 3, 0).reshape(v.shape[3], len(rows), -1) for v in (p, pq))
        else:
            p, pq = p.reshape(len(rows), -1), pq.reshape(len(rows), -1)
        self.kept.append((pq, p))
        if sum(b[0].size for b in self.kept) >= FOLD:
            self.fold()

    def fold(self) -> None:
        """Add the kept rows to the sums and drop them."""
        bq, bf = (np.concatenate([b[k] for b in self.kept], axis=-2) for k in (0, 1))
        gram = (bq.swapaxes(-1, -2) @ bq).astype(np.float64)
        if self.direct:
            y = bf @ self.w.swapaxes(-1, -2)                                      # X W^T
            sums = [gram, (y.swapaxes(-1, -2) @ bq).astype(np.float64), float(np.sum(y.astype(np.float64) ** 2))]
        else:
            sums = [gram, *((a.swapaxes(-1, -2) @ b).astype(np.float64) for a, b in ((bq, bf), (bf, bf)))]
        self.sums = sums if self.sums is None else [s + n for s, n in zip(self.sums, sums)]
        self.kept = []

    def reconstruction(self) -> Reconstruction:
        rows = sum(b[0].shape[-2] for b in self.kept)
        if self.sums is not None or self.depthwise or (self.kept and rows * 2 > self.kept[0][0].shape[-1]):
            if self.kept:
                self.fold()
            gram, *rest = self.sums
            if self.direct:
                return Reconstruction(*rest, gram)                              # T, E
            return Reconstruction.from_grams(gram, *rest, self.w)               # C, F
        return Reconstruction.from_rows(*(np.concatenate([b[k] for b in self.kept]) for k in (0, 1)), self.w)


def step_cost(w_shape: tuple[int, ...], rows: int | None) -> int:
    """Multiply-adds of one optimisation step for weights of `w_shape` ([O, K], or depthwise [C, 1, K]), with
    `rows` kept rows or (None) Gram matrices."""
    size = int(np.prod(w_shape))
    return 2 * size * rows if rows is not None else size * w_shape[-1]


def steps_for(cost: int, iterations: int) -> int:
    """`iterations` for a layer whose step costs STEP_BUDGET or more; a cheaper one (the early layers: few
    channels, small patches) gets up to MAX_STEP_SCALE times as many, while its steps together cost at most
    what `iterations` steps at STEP_BUDGET do (docs/quantization.md)."""
    return int(iterations * min(MAX_STEP_SCALE, max(1.0, STEP_BUDGET / max(cost, 1))))


def learn_rounding(w: np.ndarray, scales: np.ndarray, bits: int, recon: Reconstruction,
                   iterations: int = ITERATIONS) -> np.ndarray:
    """Integer weights [O, K] (or depthwise [C, 1, K] with per-channel Grams) for float `w` and per-row
    `scales`, minimising `recon`'s error (module docstring). float32 throughout, one matrix product per step;
    the elementwise work runs in place in buffers kept across the steps (temporaries of layer size each step
    cost as much as the arithmetic: EfficientNet-Lite0's classifier has 1.28 M weights)."""
    lo, hi = weight_range(bits)
    s = scales.reshape(-1, *([1] * (w.ndim - 1))).astype(np.float32)
    w = w.astype(np.float32)
    ratio = w / s
    floor = np.floor(ratio)
    frac = np.clip(ratio - floor, 1e-4, 1 - 1e-4)
    v = -np.log((ZETA - GAMMA) / (frac - GAMMA) - 1)                # h(v) = frac
    target = recon.target
    norm = max(recon.error(np.clip(np.rint(ratio), lo, hi) * s), 1e-30)     # nearest rounding's error
    edge = np.flatnonzero((floor < lo) | (floor + 1 > hi))         # where floor + h can leave [lo, hi]
    m, u = np.zeros_like(v), np.zeros_like(v)
    sig, h, q, grad, tmp = (np.empty_like(v) for _ in range(5))
    inside = np.empty(v.shape, bool)
    warm = int(WARMUP * iterations)
    for t in range(1, iterations + 1):
        np.negative(v, out=tmp)
        np.exp(tmp, out=tmp)
        tmp += 1
        np.divide(1, tmp, out=sig)
        np.multiply(sig, ZETA - GAMMA, out=h)
        h += GAMMA
        np.clip(h, 0.0, 1.0, out=h)
        np.add(floor, h, out=q)
        flat = q.reshape(-1)
        outside = (flat[edge] < lo) | (flat[edge] > hi)
        flat[edge] = np.clip(flat[edge], lo, hi)
        q *= s
        grad_h = recon.times_gram(q)
        grad_h -= target
        grad_h *= 2 / norm
        grad_h *= s
        grad_h.reshape(-1)[edge[outside]] = 0
        if t > warm:
            beta = BETA[0] + (BETA[1] - BETA[0]) * (t - warm) / max(iterations - warm, 1)
            np.multiply(h, 2, out=tmp)
            tmp -= 1
            np.abs(tmp, out=grad)
            grad **= beta - 1
            grad *= 2 * REGULARIZATION * beta / h.size
            np.copysign(grad, tmp, out=grad)
            grad_h -= grad
        grad_h *= ZETA - GAMMA
        grad_h *= sig
        np.subtract(1, sig, out=tmp)
        grad_h *= tmp
        np.greater(h, 0, out=inside)
        grad_h *= inside
        np.less(h, 1, out=inside)
        grad_h *= inside
        m *= 0.9
        np.multiply(grad_h, 0.1, out=tmp)
        m += tmp
        np.square(grad_h, out=tmp)
        tmp *= 0.001
        u *= 0.999
        u += tmp
        np.divide(u, 1 - 0.999 ** t, out=tmp)
        np.sqrt(tmp, out=tmp)
        tmp += 1e-8
        np.divide(m, 1 - 0.9 ** t, out=grad)
        grad *= LEARNING_RATE
        grad /= tmp
        v -= grad
    return np.clip(floor + (v >= 0), lo, hi)


@dataclass
class Layer:
    """A roundable layer of the quantized graph, its float twin and what learning its rounding will cost."""
    node: Node
    float_node: Node
    flat_shape: tuple[int, ...]           # the weights as the steps see them: [O, K], or depthwise [C, 1, K]
    rows: int                             # sampled input rows over the calibration set
    steps: int
    step_cost: int                        # multiply-adds per step

    @property
    def depthwise(self) -> bool:
        return len(self.flat_shape) == 3


def plan(float_graph: Graph, qgraph: Graph, samples: int, iterations: int = ITERATIONS) -> list[Layer]:
    """The roundable layers of `qgraph` in graph order (matched to `float_graph` by node name), with the rows,
    steps and step cost that `samples` calibration samples give each."""
    require_split(float_graph)
    float_nodes = {n.name: n for n in float_graph.nodes}
    per_sample = -(-ROWS // max(samples, 1))
    layers = []
    for node in qgraph.topological():
        if not roundable(qgraph, node) or node.name not in float_nodes:
            continue
        w_shape = qgraph.values[node.inputs[1]].const.shape
        x_shape = tuple(max(d, 1) for d in qgraph.values[node.inputs[0]].shape)
        rows = samples * min(output_positions(x_shape, windows(x_shape, node, w_shape)), per_sample)
        k = int(np.prod(w_shape[1:]))
        flat = (w_shape[0], 1, k) if depthwise(node) else (w_shape[0], k)
        cost = step_cost(flat, None if depthwise(node) or rows * 2 > flat[-1] else rows)
        layers.append(Layer(node, float_nodes[node.name], flat, rows, steps_for(cost, iterations), cost))
    return layers


def estimate_seconds(layers: list[Layer], pass_seconds: float, rates: tuple[float, float]) -> list[float]:
    """Each layer's expected share of AdaRound's time: its Adam steps (multiply-adds at `rates[0]` per second,
    STEP_PASSES elementwise passes over its weights at `rates[1]`, STEP_CALLS), its sums (`LayerStats`: the
    Gram matrix and the float side's products, PATCH_PASSES over the patches), and its share of the two runs
    over the calibration set (float and int8, `pass_seconds` each for the whole graph). The quantizer passes
    fixed reference rates (`cost.REFERENCE_RATES`), so the estimate is the model's."""
    macs, elements = rates
    seconds = []
    for layer in layers:
        outputs, k = layer.flat_shape[-2:]
        values = layer.rows * k * (layer.flat_shape[0] if layer.depthwise else 1)     # sampled patch values
        seconds.append(layer.steps * (layer.step_cost / macs + STEP_PASSES * int(np.prod(layer.flat_shape))
                                      / elements + STEP_CALLS)
                       + values * (k + 2 * min(outputs, k)) / macs + PATCH_PASSES * values / elements
                       + 2 * pass_seconds / len(layers))
    return seconds


def adaround_weights(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]],
                     iterations: int = ITERATIONS, layers: list[Layer] | None = None,
                     seconds: list[float] | None = None) -> int:
    """Learn the rounding of every `roundable` layer of `qgraph` (mutated: its integer weights change, the
    scales stay); layers are matched to the float graph by node name (`plan`). `seconds`, each layer's
    estimated time, weighs the progress. Returns the number of layers."""
    layers = plan(float_graph, qgraph, len(samples), iterations) if layers is None else layers
    per_sample = -(-ROWS // max(len(samples), 1))
    float_run = Stepper(float_graph, samples, [layer.float_node for layer in layers])
    quant_run = Stepper(qgraph, samples, [layer.node for layer in layers])   # each layer with the rounding so far
    bar = Progress("adaround", len(layers), seconds)
    for i, layer in enumerate(layers):
        node, value = layer.node, qgraph.values[layer.node.inputs[1]]
        w = float_graph.const(layer.float_node.inputs[1]).reshape(layer.flat_shape).astype(np.float32)
        stats = LayerStats(node, w, per_sample, i)
        inputs = zip(float_run.advance(layer.float_node), quant_run.advance(node))
        scales = np.array([p.scale for p in value.quant_params], np.float64)
        with thread_limit(1):
            for x, xq in inputs:
                stats.add(x, xq, value.const.shape)
            recon = stats.reconstruction()
            q = learn_rounding(w, scales, value.quant_params[0].numBits, recon,
                               steps_for(recon.step_cost(layer.flat_shape), iterations))
        value.const = q.reshape(value.const.shape).astype(np.int8)
        bar.step()
    return len(layers)
