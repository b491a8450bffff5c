"""fuse_bias: Add(layer(x), c) -> layer(x, w, b + c) for a per-channel linear layer (`layers.linear_layer`:
Conv2D, FullConnection) and a constant `c` that holds one value per output channel. ONNX spells a dense layer as
MatMul then Add, with the bias first or second (PyTorch's exporter writes `Add(bias, MatMul(...))`): without this
the product runs without its bias, and a separate pass over the whole output adds it (MiniLM: 18 such passes a
run), and the residual sum that often follows cannot fuse either (`fuse_residual` needs the layer's output).

Only when the layer has no activation of its own, one reader (the Add), a constant weight and bias, and the Add
does not broadcast the layer's output to a larger shape; the Add's activation becomes the layer's. Training
graphs never run it (the bias must stay the parameter the model names).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.passes.layers import linear_layer
from converter.passes.match import other_input
from lite.traits import traits
from schema import fb


def _channel_bias(graph: Graph, layer: Node, constant: str) -> np.ndarray | None:
    """`constant` as a bias vector [out channels] when it adds one value per output channel along the layer
    output's last axis, without growing the output's shape; else None."""
    c, weight = graph.const(constant), graph.const(layer.inputs[1])
    out = graph.values[layer.outputs[0]]
    if c is None or weight is None or c.dtype != np.float32 or out.dtype != np.float32 or c.ndim > out.rank:
        return None
    channels = weight.shape[0]
    if out.rank == 4 and out.format != fb.Format.NHWC:      # a conv's channels are last only once in NHWC
        return None
    if not out.shape or out.shape[-1] != channels or c.shape[:-1] != (1,) * (c.ndim - 1):
        return None
    if c.ndim == 0 or c.shape[-1] == 1:
        return np.full(channels, c.reshape(-1)[0], np.float32)
    return c.reshape(-1) if c.shape[-1] == channels else None


def _fusable(graph: Graph, add: Node, operand: str) -> tuple[Node, np.ndarray] | None:
    layer = graph.producer(operand)
    if layer is None or not linear_layer(layer) or layer.attrs.get("activation", 0):
        return None
    if graph.uses(operand) != 1 or operand in graph.outputs or len(layer.inputs) > 3:
        return None
    index = traits(layer.op).bias_input
    bias = layer.inputs[index] if len(layer.inputs) > index else ""
    if bias and graph.const(bias) is None:
        return None
    added = _channel_bias(graph, layer, other_input(add, operand))
    if added is None or graph.values[add.outputs[0]].shape != graph.values[operand].shape:
        return None
    return layer, added if not bias else graph.const(bias) + added


def fuse_bias(graph: Graph) -> None:
    for add in graph.op_nodes("Add"):
        if len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
            continue
        for operand in add.inputs:
            found = _fusable(graph, add, operand)
            if found is None:
                continue
            layer, bias = found
            index = traits(layer.op).bias_input
            layer.inputs = layer.inputs[:index] + [graph.add_const(bias.astype(np.float32), f"{layer.name}/bias")]
            layer.attrs["activation"] = add.attrs.get("activation", 0)
            graph.remove_node(add)
            graph.values.pop(add.outputs[0])
            graph.rename_value(operand, add.outputs[0])     # the layer now makes the sum, under the Add's name
            break
    graph.sort()
