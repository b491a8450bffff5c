"""Dynamic quantization (`[common_quant_param] quant_type=DYNAMIC_QUANT`, MindSpore Lite's name): no calibration.
Weights become int8, symmetric per output channel, and their nodes are marked `QuantType.DYNAMIC`; the runtime's
DYNAMIC kernels quantize the float input at every run (each row, a token, with its own range) and multiply in
integers (`lite/kernels/int8/dynamic_matmul.py`). Everything else stays float, so inputs, outputs and the ops
between the products keep the float model's behaviour.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.quant.weights import quantize_weight, weight_axis, weight_quantizable
from lite.dtypes import DataType
from lite.kernel import kernel_for
from lite.traits import traits
from schema import fb


def dynamic_node(node: Node, graph: Graph, min_size: int, min_channel: int) -> bool:
    """Whether `node` gets a dynamic kernel: an op that has one, a float32 input and a float32 constant weight
    above the size thresholds (`weight_quantizable`)."""
    if kernel_for(node.op, DataType.FLOAT32, quantized=True) is kernel_for(node.op, DataType.FLOAT32):
        return False
    x = graph.values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    return (x is not None and x.dtype == np.float32 and x.const is None
            and weight_quantizable(node, graph, min_size, min_channel))


def dynamic_quantize(graph: Graph, bits: int = 8, min_size: int = 0, min_channel: int = 16) -> Graph:
    """Give every `dynamic_node` an int8 weight (`bits` <= 8 wide, per channel) and the DYNAMIC quant type.
    Mutates and returns `graph`; the float weights no other node reads are dropped."""
    for node in list(graph.nodes):
        if not dynamic_node(node, graph, min_size, min_channel):
            continue
        index = traits(node.op).weight_input
        w = graph.const(node.inputs[index])
        axis = weight_axis(node, w)
        q, params = quantize_weight(w, axis, bits)
        source = graph.values[node.inputs[index]]
        name = graph.add_const(q, f"{source.name}_quant")
        value = graph.values[name]
        value.quant_params, value.quant_axis = params, axis
        value.format, value.source_perm = source.format, source.source_perm
        node.inputs[index] = name
        node.quant_type = fb.QuantType.DYNAMIC
    graph.prune()
    return graph
