"""fuse_residual: Add(conv(x), r) -> conv(x, w, b, r), the Add's activation becoming the conv's, for the ops
that declare a `residual_input` (Conv2D, FullConnection). A residual sum (ResNet's blocks, MobileNetV2's inverted
residuals, a transformer's projections) is then written by the op's epilogue instead of another pass that reads
both operands and writes the sum (ResNet-50: 16 such passes, 3.7 ms of 46 at batch 1).

Only float32 inference graphs: the op must have no activation of its own (the sum comes before it), one reader
(the Add), and `r` the Add's output shape, so nothing broadcasts (with unknown dims: the same shapes at both of
shape inference's probe settings; the conv kernel still checks the shapes at run time). The quantizer splits
the sums back (`split_residuals`) and training graphs never run this pass: their int8 kernels and gradients take
the Add as a node of its own.

A Conv2D also takes the shortcut of a channel-padded residual (BlazeFace's blocks: `r` = Pad(s) with zero
channels appended, read only by the Add) as `s` itself: its epilogue adds `s` to the first channels, and the Pad,
a copy of the whole activation, is gone (MediaPipe's face detector: 11 such Pads, about 8 % of a run).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.shape_inference import probe_specs
from lite.traits import traits
from schema import fb

NARROW_RESIDUAL_OPS = ("Conv2D",)     # ops whose kernels add a residual of fewer channels to the first ones


def _fusable(graph: Graph, add: Node, operand: str, other: str) -> Node | None:
    """The producer of `operand` when it can absorb `other` as its residual input."""
    conv = graph.producer(operand)
    if conv is None or traits(conv.op).residual_input is None or conv.attrs.get("activation", 0):
        return None
    index = traits(conv.op).residual_input
    if len(conv.inputs) > index or graph.uses(operand) != 1 or operand in graph.outputs:
        return None
    values = [graph.values.get(v) for v in (operand, other, add.outputs[0])]
    if any(v is None or v.dtype != np.float32 for v in values):
        return None
    shapes = [[spec.shape for spec in probe_specs(v)] for v in values]     # unknown dims at two settings
    return conv if shapes[0] == shapes[1] == shapes[2] else None


def _channel_padded(graph: Graph, value: str) -> str | None:
    """The input of the Pad making `value` when that Pad only appends zero channels (the last axis of a rank-4
    tensor) and the Add is its one reader; else None."""
    pad = graph.producer(value)
    if pad is None or pad.op != "Pad" or graph.uses(value) != 1 or value in graph.outputs:
        return None
    amounts = graph.const(pad.inputs[1]) if len(pad.inputs) > 1 else None
    fill = graph.const(pad.inputs[2]) if len(pad.inputs) > 2 and pad.inputs[2] else np.zeros(1)
    if (pad.attrs.get("mode", 0) != fb.PaddingFill.CONSTANT or amounts is None or amounts.size != 8
            or fill is None or np.any(fill != 0) or (len(pad.inputs) > 3 and pad.inputs[3])):
        return None
    amounts = amounts.ravel()
    return pad.inputs[0] if not np.any(amounts[:7]) and amounts[7] > 0 else None


def fuse_residual(graph: Graph) -> None:
    for add in graph.op_nodes("Add"):
        if len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
            continue
        for operand, other in (add.inputs, add.inputs[::-1]):
            conv = _fusable(graph, add, operand, other)
            if conv is None:
                continue
            conv.inputs += [""] * (traits(conv.op).residual_input - len(conv.inputs))   # an omitted bias stays ""
            narrow = _channel_padded(graph, other) if conv.op in NARROW_RESIDUAL_OPS else None
            if narrow is not None:
                graph.remove_node(graph.producer(other))
                graph.values.pop(other)
                other = narrow
            conv.inputs.append(other)
            conv.attrs["activation"] = add.attrs.get("activation", 0)
            graph.remove_node(add)
            graph.values.pop(add.outputs[0])
            graph.rename_value(operand, add.outputs[0])     # the conv now makes the sum, under the Add's name
            break
    graph.sort()


def _residual_index(node: Node) -> int | None:
    """The input index of the residual sum `node` carries, None when it carries none."""
    index = traits(node.op).residual_input
    return index if index is not None and len(node.inputs) > index and node.inputs[index] else None


def split_residuals(graph: Graph) -> Graph:
    """The inverse, for the quantizer: every residual input becomes an Add of its own again (taking the conv's
    activation), so calibration sees the conv's own output and the sum gets int8 parameters of its own."""
    for conv in list(graph.nodes):
        index = _residual_index(conv)
        if index is None:
            continue
        out = graph.values[conv.outputs[0]]
        own = graph.fresh(f"{out.name}_before_residual")
        graph.values[own] = Value(own, out.shape, out.dtype, format=out.format)
        graph.nodes.append(Node("Add", graph.fresh(f"{conv.name}/residual"), [own, _padded(graph, conv, index)],
                                [out.name], {"activation": conv.attrs.get("activation", 0)}))
        conv.inputs = conv.inputs[:index]
        while conv.inputs[-1] == "":                       # the empty bias slot the residual needed
            conv.inputs.pop()
        conv.attrs = {**conv.attrs, "activation": 0}
        conv.outputs = [own, *conv.outputs[1:]]
    graph.sort()
    return graph


def _padded(graph: Graph, conv: Node, index: int) -> str:
    """The residual of `conv` as the Add takes it: a residual of fewer channels through the Pad it had."""
    residual, out = graph.values[conv.inputs[index]], graph.values[conv.outputs[0]]
    missing = out.shape[-1] - residual.shape[-1]
    if not missing:
        return residual.name
    padded = graph.fresh(f"{residual.name}_padded")
    graph.values[padded] = Value(padded, out.shape, out.dtype, format=out.format)
    amounts = graph.add_const(np.array([0] * 7 + [missing], np.int64), f"{padded}_amounts")
    graph.nodes.append(Node("Pad", graph.fresh(f"{conv.name}/channel_padding"), [residual.name, amounts], [padded],
                            {"mode": fb.PaddingFill.CONSTANT}))
    return padded


def require_split(graph: Graph) -> None:
    """ValueError naming the first node that still carries a residual sum: the quantizer's layer-by-layer tools
    (bias correction, AdaRound) compare each layer's own output, which a fused conv does not expose."""
    for node in graph.nodes:
        if _residual_index(node) is not None:
            raise ValueError(f"node '{node.name}' carries a fused residual sum: split_residuals(graph) first")
