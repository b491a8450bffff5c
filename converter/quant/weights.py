"""Per-channel symmetric weight quantization and the weight-only rewrite (int8/int16 weights + QuantDTypeCast).

Weights are symmetric per output channel (zero point 0) in the narrow range [-(2^(b-1) - 1), 2^(b-1) - 1]
(1-bit weights, where that range is empty, use {-1, 0, 1}).
Which input is the weight and its channel axis are the op's traits (`traits(op).weight_input`, `.weight_axis`):
Conv2D OHWI -> 0, FullConnection [out, in] -> 0, MatMul constant B -> its last axis.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from converter.ir import Graph, Node, Value
from converter.quant.qparams import make_param, qrange, quantize
from lite.dtypes import DataType
from lite.traits import traits
from schema import fb


def weight_axis(node: Node, weight: np.ndarray) -> int:
    """The output-channel axis of `node`'s weight."""
    return traits(node.op).weight_axis % weight.ndim


def weight_range(bits: int) -> tuple[int, int]:
    hi = max(qrange(bits, narrow=True)[1], 1)
    return -hi, hi


WEIGHT_METHODS = ("MAX_MIN", "MSE", "PERCENTILE")
CLIP_CANDIDATES = np.linspace(0.3, 1.0, 71)     # MSE: clip fractions of max|w| tried per channel
WEIGHT_PERCENTILE = 99.9                          # PERCENTILE: of |w| per channel


def _channels_first(w: np.ndarray, axis: int) -> np.ndarray:
    return np.moveaxis(w.astype(np.float64), axis, 0).reshape(w.shape[axis], -1)


def channel_scales(w: np.ndarray, axis: int, bits: int, method: str = "MAX_MIN") -> np.ndarray:
    """Per-channel scales: clip threshold over the largest integer; all-zero channels get scale 1.
    MAX_MIN clips at max|w|; PERCENTILE at the channel's WEIGHT_PERCENTILE-th percentile of |w|; MSE at the
    fraction of max|w| (CLIP_CANDIDATES) whose quantized channel is closest to the float one in squared error."""
    hi = weight_range(bits)[1]
    a = np.abs(_channels_first(w, axis)) if w.size else np.zeros((w.shape[axis], 1))
    top = a.max(axis=1)
    if method == "PERCENTILE":
        top = np.percentile(a, WEIGHT_PERCENTILE, axis=1)
    elif method == "MSE":
        errors = []
        for fraction in CLIP_CANDIDATES:
            scale = np.where(top > 0, fraction * top / hi, 1.0)[:, None]
            errors.append(((np.clip(np.rint(a / scale), 0, hi) * scale - a) ** 2).sum(axis=1))
        top = top * CLIP_CANDIDATES[np.argmin(np.stack(errors), axis=0)]
    return np.where(top > 0, top / hi, 1.0)


def quantize_weight(w: np.ndarray, axis: int, bits: int,
                    method: str = "MAX_MIN") -> tuple[np.ndarray, list[fb.QuantParamT]]:
    """Integer weights (int8 for <= 8 bits, else int16) and one QuantParam per channel along `axis`. min/max
    stay at their defaults (FlatBuffers then omits them): per-channel params are a large part of an int8 file."""
    scales = channel_scales(w, axis, bits, method)
    shape = [1] * w.ndim
    shape[axis] = -1
    lo, hi = weight_range(bits)
    q = quantize(w, scales.reshape(shape), 0, lo, hi, np.dtype(np.int8 if bits <= 8 else np.int16))
    return q, [make_param(s, 0, 0.0, 0.0, bits, True) for s in scales]


def dequantize_weight(q: np.ndarray, params: list[fb.QuantParamT], axis: int) -> np.ndarray:
    shape = [1] * q.ndim
    shape[axis] = -1
    scales = np.array([p.scale for p in params], np.float64).reshape(shape)
    return (q.astype(np.float64) * scales).astype(np.float32)


def weight_quantizable(node: Node, graph: Graph, min_size: int, min_channel: int) -> bool:
    """Quantize a constant weight of more than `min_size` elements and more than `min_channel` channels."""
    index = traits(node.op).weight_input
    if index is None or len(node.inputs) <= index:
        return False
    w = graph.const(node.inputs[index])
    if w is None or w.dtype != np.float32 or w.ndim < 2:
        return False
    return w.size > min_size and w.shape[weight_axis(node, w)] > min_channel


def weight_only_quantize(graph: Graph, bits: int | Callable[[np.ndarray, int], int], min_size: int = 0,
                         min_channel: int = 16) -> Graph:
    """Replace each quantizable weight with its integer version followed by a QuantDTypeCast to float32 (the
    runtime folds the cast at load). Other ops and weights are untouched. `bits` may choose per weight
    (weight, channel axis) -> bits (mixed-bit weight quantization). Mutates and returns `graph`."""
    for node in list(graph.nodes):
        if not weight_quantizable(node, graph, min_size, min_channel):
            continue
        index = traits(node.op).weight_input
        w = graph.const(node.inputs[index])
        axis = weight_axis(node, w)
        q, params = quantize_weight(w, axis, bits(w, axis) if callable(bits) else bits)
        source = graph.values[node.inputs[index]]
        qname = graph.add_const(q, f"{source.name}_quant")
        qvalue = graph.values[qname]
        qvalue.quant_params, qvalue.quant_axis = params, axis
        qvalue.format, qvalue.source_perm = source.format, source.source_perm
        fname = graph.fresh(f"{source.name}_dequant")
        graph.values[fname] = Value(fname, q.shape, np.dtype(np.float32), format=source.format)
        src = DataType.INT8 if q.dtype == np.int8 else DataType.INT16
        graph.nodes.append(Node("QuantDTypeCast", graph.fresh(f"{node.name}/weight_dequant"), [qname], [fname],
                                {"src_t": int(src), "dst_t": int(DataType.FLOAT32)}))
        node.inputs[index] = fname
    graph.prune()
    graph.sort()
    return graph
