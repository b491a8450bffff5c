"""fuse_affine: Mul(layer(x), s) and Add(layer(x), c) -> layer(x) with the weight and bias scaled by s and c
added to the bias, for a per-channel linear layer (`layers.linear_layer`: Conv2D, FullConnection) and constants
holding one value per output channel (or one for all). ONNX spells a dense layer as MatMul then Add, with the
bias first or second (PyTorch's exporter writes `Add(bias, MatMul(...))`), and PaddleOCR's networks follow each
conv with a learnable scale and shift (`Mul` and `Add` by scalars): each is one more pass over the layer's output
(MiniLM: 24 a run; PP-OCRv4's recognizer: 76), and it keeps the activation and residual sum that follow from
fusing into the layer (`fuse_activation`, `fuse_residual` need the layer's output).

Only when the layer has no activation of its own, one reader (the Mul or Add), a constant float32 weight and
bias, and the Mul or Add does not broadcast the layer's output to a larger shape; the Add's or Mul's activation
becomes the layer's. The scaled weight is a new constant (the source may share one between layers). Training
graphs never run it (weight and bias must stay the parameters the model names).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node
from converter.passes.layers import dense_or_depthwise, depthwise, linear_layer, pads
from converter.passes.match import other_input
from lite.traits import traits


def _per_channel(graph: Graph, layer: Node, constant: str) -> np.ndarray | None:
    """`constant` as a vector [out channels] when it holds one value per output channel along the layer
    output's last axis (the channel axis of both ops: Conv2D is NHWC) or one value, without growing the output's
    shape; else None."""
    c, weight = graph.const(constant), graph.const(layer.inputs[1])
    out = graph.values[layer.outputs[0]]
    if c is None or weight is None or weight.dtype != np.float32 or c.dtype != np.float32 or c.ndim > out.rank:
        return None
    channels = weight.shape[0]
    if not out.shape or out.shape[-1] not in (channels, -1) or c.shape[:-1] != (1,) * (c.ndim - 1):
        return None
    if c.ndim == 0 or c.shape[-1] == 1:
        return np.full(channels, c.reshape(-1)[0], np.float32)
    return c.reshape(-1) if c.shape[-1] == channels else None


def _fusable(graph: Graph, node: Node, operand: str) -> tuple[Node, np.ndarray] | None:
    """The layer computing `operand` and `node`'s other operand as a per-channel vector, when it can take it."""
    layer = graph.producer(operand)
    if layer is None or not linear_layer(layer) or layer.attrs.get("activation", 0):
        return None
    if graph.uses(operand) != 1 or operand in graph.outputs or len(layer.inputs) > 3:
        return None
    index = traits(layer.op).bias_input
    if len(layer.inputs) > index and layer.inputs[index] and graph.const(layer.inputs[index]) is None:
        return None
    vector = _per_channel(graph, layer, other_input(node, operand))
    if vector is None or graph.values[node.outputs[0]].shape != graph.values[operand].shape:
        return None
    if node.op == "Mul" and _integer_valued(graph.const(layer.inputs[1])):
        return None
    return layer, vector


def _integer_valued(weight: np.ndarray) -> bool:
    """True for a weight of whole numbers: the integer form of QLinearConv / ConvInteger / MatMulInteger sums
    exact integers and requantizes them with one product, which a scaled weight would round term by term."""
    return bool(np.all(weight == np.round(weight)))


def _absorb(graph: Graph, layer: Node, op: str, vector: np.ndarray) -> None:
    """Scale the layer's weight and bias by `vector` (Mul), or add it to the bias (Add)."""
    index = traits(layer.op).bias_input
    bias = graph.const(layer.inputs[index]) if len(layer.inputs) > index and layer.inputs[index] else None
    if op == "Mul":
        weight = graph.const(layer.inputs[1])
        scale = vector.reshape((-1,) + (1,) * (weight.ndim - 1))
        layer.inputs[1] = graph.add_const((weight * scale).astype(np.float32), f"{layer.name}/weight")
        bias = None if bias is None else bias * vector
    else:
        bias = vector if bias is None else bias + vector
    if bias is not None:
        layer.inputs = layer.inputs[:index] + [graph.add_const(bias.astype(np.float32), f"{layer.name}/bias")]


def _input_channels(graph: Graph, node: Node, operand: str, layer: Node) -> np.ndarray | None:
    """`node`'s constant operand as a vector [in channels of `layer`] (one value per channel of its input's last
    axis, or one value), when `node`'s output has the shape of `operand`; else None."""
    c, weight = graph.const(other_input(node, operand)), graph.const(layer.inputs[1])
    x = graph.values[node.outputs[0]]
    if c is None or weight is None or weight.dtype != np.float32 or c.dtype != np.float32 or c.ndim > x.rank:
        return None
    if graph.values[operand].shape != x.shape or c.shape[:-1] != (1,) * (c.ndim - 1) or not x.shape:
        return None
    channels = x.shape[-1]
    if c.ndim == 0 or c.shape[-1] == 1:
        return np.full(channels, c.reshape(-1)[0], np.float32)
    return c.reshape(-1) if c.shape[-1] == channels else None


def _fold_forward(graph: Graph, node: Node) -> bool:
    """Fold `node` (Mul or Add by a per-channel constant) into the layer that alone reads it, as a scale of the
    weight's input channels or a shift of its bias (sum over the taps of W times the shift): Conv2D without
    groups or depthwise, FullConnection. A shift needs a layer that never pads (padding would read zeros, not the
    shift)."""
    if node.attrs.get("activation", 0) or len(node.inputs) != 2 or node.inputs[0] == node.inputs[1]:
        return False
    readers = graph.consumers(node.outputs[0])
    if len(readers) != 1 or graph.uses(node.outputs[0]) != 1 or node.outputs[0] in graph.outputs:
        return False
    layer = readers[0]
    if not dense_or_depthwise(layer) or layer.inputs[0] != node.outputs[0] or len(layer.inputs) > 3:
        return False
    index = traits(layer.op).bias_input
    bias = graph.const(layer.inputs[index]) if len(layer.inputs) > index and layer.inputs[index] else None
    if bias is None and len(layer.inputs) > index and layer.inputs[index]:
        return False
    if node.op == "Add" and pads(layer):
        return False
    for operand in node.inputs:
        vector = _input_channels(graph, node, operand, layer)
        if vector is not None and graph.const(operand) is None:
            break
    else:
        return False
    weight = graph.const(layer.inputs[1])
    per_tap = vector.reshape(-1, 1, 1, 1) if depthwise(layer) else vector      # depthwise: [C, KH, KW, 1]
    if node.op == "Mul":
        layer.inputs[1] = graph.add_const((weight * per_tap).astype(np.float32), f"{layer.name}/weight")
    else:
        shift = (weight * per_tap).reshape(weight.shape[0], -1).sum(axis=1)
        bias = shift if bias is None else bias + shift
        layer.inputs = layer.inputs[:index] + [graph.add_const(bias.astype(np.float32), f"{layer.name}/bias")]
    layer.inputs[0] = operand
    graph.remove_node(node)
    graph.values.pop(node.outputs[0])
    return True


def fuse_affine(graph: Graph) -> None:
    for node in graph.op_nodes("Mul", "Add"):
        if len(node.inputs) != 2 or node.inputs[0] == node.inputs[1]:
            continue
        for operand in node.inputs:
            found = _fusable(graph, node, operand)
            if found is None:
                continue
            layer, vector = found
            _absorb(graph, layer, node.op, vector)
            layer.attrs["activation"] = node.attrs.get("activation", 0)
            graph.remove_node(node)
            graph.values.pop(node.outputs[0])
            graph.rename_value(operand, node.outputs[0])     # the layer now makes the result, under its name
            break
    for node in reversed(graph.op_nodes("Mul", "Add")):       # Add(Mul(x, s), c) -> layer: the Add first
        if node in graph.nodes:
            _fold_forward(graph, node)
    graph.sort()
