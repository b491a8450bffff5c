"""Dynamic quantization (`[common_quant_param] quant_type=DYNAMIC_QUANT`, MindSpore Lite's name): no calibration.
Weights become int8, symmetric per output channel, and their nodes are marked `QuantType.DYNAMIC`; the runtime's
DYNAMIC kernels quantize the float input at every run and multiply in integers: FullConnection each input row (a
token) with its own range (`lite/kernels/int8/dynamic_matmul.py`), LSTM and GRU their X and each step's h as
DynamicQuantizeLSTM does (`lite/kernels/int8/dynamic_recurrent.py`). Everything else stays float, so inputs,
outputs and the ops between the products keep the float model's behaviour. A GELU that alone reads a dynamic
FullConnection becomes its fused activation (`fold_gelu`): the compiled kernel applies it to each block it writes.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.quant.weights import quantize_weight, weight_axis, weight_quantizable
from lite.dtypes import DataType
from lite.kernel import kernel_for
from lite.traits import traits
from schema import fb

RECURRENT = {"LSTM": 8, "GRU": 6}     # recurrent ops with a DYNAMIC kernel: their inputs before the scales


def dynamic_node(node: Node, graph: Graph, min_size: int, min_channel: int) -> bool:
    """Whether `node` gets a dynamic kernel: an op that has one, a float32 input and a float32 constant weight
    above the size thresholds (`weight_quantizable`)."""
    if kernel_for(node.op, DataType.FLOAT32, quantized=True) is kernel_for(node.op, DataType.FLOAT32):
        return False
    x = graph.values.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    return (x is not None and x.dtype == np.float32 and x.const is None
            and weight_quantizable(node, graph, min_size, min_channel))


def quantize_recurrent(node: Node, graph: Graph, bits: int) -> None:
    """LSTM or GRU: W [D, G*H, I] and R [D, G*H, H] int8 with one scale per direction and gate row, given after
    the op's own inputs (W_scale, W_zero_point, R_scale, R_zero_point: DynamicQuantizeLSTM's layout)."""
    node.inputs += [""] * (RECURRENT[node.op] - len(node.inputs))
    for index in (1, 2):
        w = graph.const(node.inputs[index])
        q, params = quantize_weight(w.reshape(-1, w.shape[-1]), 0, bits)
        node.inputs[index] = graph.add_const(q.reshape(w.shape), f"{graph.values[node.inputs[index]].name}_quant")
        scale = np.array([p.scale for p in params], np.float32).reshape(w.shape[:2])
        node.inputs += [graph.add_const(scale, f"{node.name}_{'WR'[index - 1]}_scale"),
                        graph.add_const(np.zeros(w.shape[:2], np.int8), f"{node.name}_{'WR'[index - 1]}_zero_point")]
    node.quant_type = fb.QuantType.DYNAMIC


def recurrent_node(node: Node, graph: Graph, min_size: int) -> bool:
    """An LSTM or GRU with float32 input and constant float32 W and R (larger than `min_size`), in the float
    form."""
    if node.op not in RECURRENT or len(node.inputs) > RECURRENT[node.op] or not node.inputs[0]:
        return False
    weights = [graph.const(node.inputs[k]) for k in (1, 2)]
    return (graph.values[node.inputs[0]].dtype == np.float32 and
            all(w is not None and w.dtype == np.float32 and w.ndim == 3 for w in weights)
            and sum(w.size for w in weights) > min_size)


def quantize_product(node: Node, graph: Graph, bits: int) -> None:
    """The weight of a `dynamic_node` as int8 per output channel (its quant params on the constant)."""
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


def fold_gelu(graph: Graph) -> None:
    """A GELU Activation whose input is a DYNAMIC FullConnection's output, read by it alone, becomes that
    FullConnection's activation (after a fused residual sum, as the Add's activation would be)."""
    for act in graph.op_nodes("Activation"):
        x = act.inputs[0]
        fc = graph.producer(x)
        if (act.attrs.get("type") != fb.ActivationType.GELU or fc is None or fc.op != "FullConnection"
                or fc.quant_type != fb.QuantType.DYNAMIC or fc.attrs.get("activation", 0)
                or graph.uses(x) != 1 or x in graph.outputs):
            continue
        fc.attrs["activation"] = fb.ActivationType.GELU
        graph.remove_node(act)
        graph.values.pop(act.outputs[0])
        graph.rename_value(x, act.outputs[0])


def dynamic_quantize(graph: Graph, bits: int = 8, min_size: int = 0, min_channel: int = 16) -> Graph:
    """Quantize every `recurrent_node` and `dynamic_node` (weights `bits` <= 8 wide) and give them the DYNAMIC
    quant type. Mutates and returns `graph`; the float weights no other node reads are dropped."""
    for node in list(graph.nodes):
        if recurrent_node(node, graph, min_size):
            quantize_recurrent(node, graph, bits)
        elif dynamic_node(node, graph, min_size, min_channel):
            quantize_product(node, graph, bits)
    fold_gelu(graph)
    graph.prune()
    return graph
