"""equalize: cross-layer equalization and bias absorption (Nagel et al., "Data-Free Quantization Through Weight
Equalization and Bias Correction", 2019), run by the quantizer before calibration (`cross_layer_equalization`).

For a pair `y = f(W1 x + b1)`, `z = W2 y + b2` whose middle tensor feeds only the second layer, and `f`
positively homogeneous (no activation, RELU), scaling channel i of the first layer by 1 / s_i and the matching
input channel of the second by s_i keeps the function. `s_i = sqrt(r1_i / r2_i)` (r: the channel's weight range)
gives both channels the range sqrt(r1_i r2_i); chains (expand -> depthwise -> project) are swept until the
scales settle. RELU6 is not homogeneous (`relu6(x / s) = relu6(x) / s` only while x stays below min(6, 6 s)):
keeping the function needs a clip bound of 6 / s_i per channel, which no int8 kernel has, so RELU6 pairs are
left alone. Bounding s by the ranges seen on calibration data is not enough either (docs/quantization.md).

Bias absorption moves a constant c_i of the middle tensor into the second layer's bias (`b2 += W2 c`): exact
for every input when there is no activation between the layers and the second does not pad (a padded border
would read the shifted zero). c_i is the centre of channel i's range on the calibration data, so every
channel is centred on 0 and the per-tensor range shrinks to the widest channel's. Behind a RELU, a shift is
exact only while the values stay above it, which unseen data does not promise: those pairs keep their biases.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from converter.ir import Graph, Node
from converter.passes.layers import dense_or_depthwise, depthwise, pads
from schema import fb

SWEEPS = 20
HOMOGENEOUS = (fb.ActivationType.NO_ACTIVATION, fb.ActivationType.RELU)


@dataclass
class Pair:
    first: Node
    second: Node

    @property
    def middle(self) -> str:
        return self.first.outputs[0]


def _layer(graph: Graph, node: Node) -> bool:
    """A dense or depthwise linear layer (Conv2D, FullConnection) with a constant float weight it alone reads."""
    if not dense_or_depthwise(node) or len(node.inputs) < 2:
        return False
    w = graph.const(node.inputs[1])
    return w is not None and w.dtype == np.float32 and graph.uses(node.inputs[1]) == 1 and (
        len(node.inputs) < 3 or not node.inputs[2] or graph.uses(node.inputs[2]) == 1)


def _in_axis(node: Node, w: np.ndarray) -> int:
    """The weight axis of the second layer that reads the middle tensor's channels."""
    return 0 if depthwise(node) else w.ndim - 1          # Conv2D OHWI, FullConnection [out, in]


Ranges = dict[str, tuple[np.ndarray, np.ndarray]]     # per-channel (min, max) of a tensor, channels last


def pairs(graph: Graph) -> list[Pair]:
    """The equalizable (first, second) layer pairs in graph order."""
    found = []
    for first in graph.nodes:
        if not _layer(graph, first) or first.attrs.get("activation", 0) not in HOMOGENEOUS:
            continue
        middle = first.outputs[0]
        readers = graph.consumers(middle)
        if middle in graph.outputs or len(readers) != 1:
            continue
        second = readers[0]
        if not _layer(graph, second) or second.inputs[0] != middle:
            continue
        w2 = graph.const(second.inputs[1])
        if w2.shape[_in_axis(second, w2)] == graph.const(first.inputs[1]).shape[0]:
            found.append(Pair(first, second))
    return found


def _along(v: np.ndarray, axis: int, ndim: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


def _channel_range(w: np.ndarray, axis: int) -> np.ndarray:
    return np.abs(w).max(axis=tuple(a for a in range(w.ndim) if a != axis))


def _bias(graph: Graph, node: Node, channels: int) -> np.ndarray:
    b = graph.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
    return np.zeros(channels, np.float64) if b is None else b.astype(np.float64)


def _set_bias(graph: Graph, node: Node, bias: np.ndarray) -> None:
    if len(node.inputs) > 2 and node.inputs[2]:
        graph.values[node.inputs[2]].const = bias.astype(np.float32)
    else:
        node.inputs = [*node.inputs[:2], graph.add_const(bias.astype(np.float32), f"{node.name}_bias")]


def equalize_pair(graph: Graph, pair: Pair) -> np.ndarray:
    """Equalize one pair in place; returns the scales s (the first layer's channel i was divided by s_i)."""
    w1v, w2v = graph.values[pair.first.inputs[1]], graph.values[pair.second.inputs[1]]
    w1, w2 = w1v.const.astype(np.float64), w2v.const.astype(np.float64)
    axis2 = _in_axis(pair.second, w2)
    r1, r2 = _channel_range(w1, 0), _channel_range(w2, axis2)
    s = np.where((r1 > 0) & (r2 > 0), np.sqrt(r1 / np.where(r2 > 0, r2, 1.0)), 1.0)
    w1v.const = (w1 / _along(s, 0, w1.ndim)).astype(np.float32)
    w2v.const = (w2 * _along(s, axis2, w2.ndim)).astype(np.float32)
    _set_bias(graph, pair.first, _bias(graph, pair.first, len(s)) / s)
    return s


def equalize(graph: Graph, sweeps: int = SWEEPS) -> int:
    """Cross-layer equalization of every pair (module docstring); returns the number of pairs."""
    found = pairs(graph)
    for _ in range(sweeps):
        change = max((float(np.abs(np.log(equalize_pair(graph, p))).max(initial=0.0)) for p in found), default=0.0)
        if change < 1e-4:
            break
    return len(found)


def absorption_pairs(graph: Graph) -> list[Pair]:
    """The pairs where a shift of the middle tensor is exact: no activation between them, no padding after."""
    return [p for p in pairs(graph) if p.first.attrs.get("activation", 0) == fb.ActivationType.NO_ACTIVATION
            and not pads(p.second)]


def absorb_biases(graph: Graph, ranges: Ranges) -> int:
    """Bias absorption for the `absorption_pairs` whose middle tensor has per-channel (min, max) in `ranges`
    (observed on the calibration data, after equalization); returns the number of pairs changed."""
    changed = 0
    for pair in absorption_pairs(graph):
        if pair.middle not in ranges:
            continue
        lo, hi = (np.asarray(v, np.float64) for v in ranges[pair.middle])
        c = (lo + hi) / 2
        w2 = graph.const(pair.second.inputs[1]).astype(np.float64)
        moved = w2 * _along(c, _in_axis(pair.second, w2), w2.ndim)
        _set_bias(graph, pair.first, _bias(graph, pair.first, len(c)) - c)
        _set_bias(graph, pair.second, _bias(graph, pair.second, w2.shape[0]) + moved.reshape(w2.shape[0], -1).sum(1))
        changed += 1
    return changed
