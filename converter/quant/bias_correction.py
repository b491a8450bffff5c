"""Bias correction (MindSpore's accuracy-loss compensation) for the int8 ops with `traits(op).bias_correction`:
Conv2D, depthwise Conv2D, FullConnection and MatMul.

For each such layer, the quantized layer alone is fed the quantized version of the float model's input to it,
so only that layer's own error shows; the per-output-channel mean of (float output - quantized output in real
units, before the output's own rounding) over the calibration set is added to the float bias, then requantized
to INT32.
A MatMul with a constant B becomes a FullConnection so that it can carry the bias.
The correction is a linear model of each layer's error: in a network that amplifies noise strongly (see
docs/quantization.md), it can lower the outputs' agreement instead, so `correct_biases_if_better` keeps it only
when the model outputs' SQNR on the calibration samples does not fall.
"""
from __future__ import annotations

import copy
import sys

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.fuse_residual import require_split
from converter.quant.calibration import feed, run_samples, session_for
from converter.quant.debug import graph_outputs, outputs_sqnr
from converter.quant.full_quant import set_int32_bias
from converter.quant.weights import dequantize_weight
from lite.dtypes import DataType
from lite.traits import traits


def channel_error_sum(float_out: np.ndarray, quant_out: np.ndarray) -> tuple[np.ndarray, int]:
    """Per output channel (the last axis: NHWC, [.., out]) the sum of float - quantized, and the count summed."""
    diff = float_out.astype(np.float64) - quant_out.astype(np.float64)
    return diff.reshape(-1, diff.shape[-1]).sum(axis=0), diff.size // diff.shape[-1]


def as_full_connection(graph: Graph, node: Node) -> None:
    """MatMul(x, B[K, N]) -> FullConnection(x, W = B^T [N, K]) with the same per-channel params."""
    b = graph.values[node.inputs[1]]
    name = graph.add_const(b.const.T, f"{b.name}_fc")
    graph.values[name].quant_params, graph.values[name].quant_axis = b.quant_params, 0
    node.op, node.inputs = "FullConnection", [node.inputs[0], name]
    node.attrs = {"activation": node.attrs.get("activation", 0)}


def correctable(graph: Graph, node: Node) -> bool:
    return (traits(node.op).bias_correction and graph.values[node.outputs[0]].dtype == np.int8
            and not (node.op == "MatMul" and node.attrs.get("transpose_a")))


def layer_graph(qgraph: Graph, node: Node, float_bias: np.ndarray | None) -> Graph:
    """float x -> quantize -> dequantize -> the layer with dequantized weights and the float bias -> y: the
    quantized layer's exact accumulator in real units, before its output is rounded to int8 (rounding error
    of near-constant channels is not a bias that a bias can correct)."""
    g = Graph(f"{node.name}_alone")
    xq, yq = qgraph.values[node.inputs[0]], qgraph.values[node.outputs[0]]
    w = qgraph.values[node.inputs[traits(node.op).weight_input]]
    for name, dtype, params in (("x", np.float32, []), ("xq", np.int8, xq.quant_params), ("xd", np.float32, [])):
        g.values[name] = Value(name, xq.shape, np.dtype(dtype), format=xq.format, quant_params=params)
    g.values["y"] = Value("y", yq.shape, np.dtype(np.float32), format=yq.format)
    inputs = ["xd", g.add_const(dequantize_weight(w.const, w.quant_params, w.quant_axis), "w")]
    if float_bias is not None:
        inputs.append(g.add_const(float_bias.astype(np.float32), "b"))
    g.inputs, g.outputs = ["x"], ["y"]
    cast = {"src_t": int(DataType.FLOAT32), "dst_t": int(DataType.INT8)}
    g.nodes = [Node("QuantDTypeCast", "quant", ["x"], ["xq"], cast),
               Node("QuantDTypeCast", "dequant", ["xq"], ["xd"], {"src_t": cast["dst_t"], "dst_t": cast["src_t"]}),
               Node(node.op, node.name, inputs, ["y"], dict(node.attrs))]
    return g


def float_bias_of(float_graph: Graph, node: Node) -> np.ndarray | None:
    b_in = traits(node.op).bias_input
    return float_graph.const(node.inputs[b_in]) if b_in is not None and len(node.inputs) > b_in else None


def correct_biases(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Fold each correctable layer's mean output error into its bias (mutates `qgraph`); returns the
    corrections by node name. Layers are matched to the float graph by node name."""
    require_split(float_graph)
    float_nodes = {n.name: n for n in float_graph.nodes}
    layers = [n for n in qgraph.nodes if correctable(qgraph, n) and n.name in float_nodes]
    for node in layers:
        if node.op == "MatMul":
            as_full_connection(qgraph, node)
    sessions = {n.name: session_for(layer_graph(qgraph, n, float_bias_of(float_graph, float_nodes[n.name])))
                for n in layers}
    wanted = {v for n in layers for v in (float_nodes[n.name].inputs[0], float_nodes[n.name].outputs[0])}
    sums = {n.name: (np.zeros(qgraph.values[n.outputs[0]].shape[-1]), 0) for n in layers}
    captured: dict[str, np.ndarray] = {}

    def visit(name: str, array: np.ndarray) -> None:
        if name in wanted:
            captured[name] = array.copy()

    def accumulate() -> None:
        for node in layers:
            fnode, session = float_nodes[node.name], sessions[node.name]
            feed(session, {"x": captured[fnode.inputs[0]]})
            session.RunGraph()
            total, count = channel_error_sum(captured[fnode.outputs[0]], session.GetOutputByTensorName("y").numpy())
            sums[node.name] = (sums[node.name][0] + total, sums[node.name][1] + count)

    run_samples(session_for(float_graph), samples, visit, "bias correction", accumulate)
    corrections = {}
    for node in layers:
        delta = sums[node.name][0] / max(sums[node.name][1], 1)
        bias = float_bias_of(float_graph, float_nodes[node.name])
        new_bias = (np.zeros_like(delta) if bias is None else bias.astype(np.float64)) + delta
        set_int32_bias(qgraph, node, new_bias, qgraph.values[node.inputs[0]].quant_params[0])
        corrections[node.name] = delta
    qgraph.prune()
    return corrections


def correct_biases_if_better(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]],
                             reference: list[dict[str, np.ndarray]] | None = None) -> Graph:
    """`qgraph` with corrected biases when that does not lower the outputs' SQNR on `samples` (against the
    float graph's outputs `reference`, run here when not given), else `qgraph` unchanged; the two SQNRs and the
    decision are reported on stderr."""
    corrected = copy.deepcopy(qgraph)
    correct_biases(float_graph, corrected, samples)
    reference = graph_outputs(float_graph, samples) if reference is None else reference
    before = outputs_sqnr(reference, graph_outputs(qgraph, samples))
    after = outputs_sqnr(reference, graph_outputs(corrected, samples))
    kept = after >= before
    print(f"bias correction: calibration output SQNR {before:.2f} dB -> {after:.2f} dB, "
          f"{'applied' if kept else 'rejected (it lowers the agreement)'}", file=sys.stderr)
    return corrected if kept else qgraph
