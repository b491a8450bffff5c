"""fuse_residual: Add(conv(x), r) -> conv(x, w, b, r), the Add's activation becoming the conv's, for the ops
that declare a `residual_input` (Conv2D, FullConnection). A residual sum (ResNet's blocks, MobileNetV2's inverted
residuals, a transformer's projections) is then written by the op's epilogue instead of another pass that reads
both operands and writes the sum (ResNet-50: 16 such passes, 3.7 ms of 46 at batch 1).

Only float32 inference graphs: the op must have no activation of its own (the sum comes before it), one reader
(the Add), and `r` the Add's output shape, so nothing broadcasts (with unknown dims: the same shapes at both of
shape inference's probe settings; the conv kernel still checks the shapes at run time). The quantizer splits
the sums back (`split_residuals`) and training graphs never run this pass: their int8 kernels and gradients take
the Add as a node of its own.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.shape_inference import probe_specs
from lite.traits import traits


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


def fuse_residual(graph: Graph) -> None:
    for add in graph.op_nodes("Add"):
        if len(add.inputs) != 2 or add.inputs[0] == add.inputs[1]:
            continue
        for operand, other in (add.inputs, add.inputs[::-1]):
            conv = _fusable(graph, add, operand, other)
            if conv is None:
                continue
            conv.inputs += [""] * (traits(conv.op).residual_input - len(conv.inputs))   # an omitted bias stays ""
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
        graph.nodes.append(Node("Add", graph.fresh(f"{conv.name}/residual"), [own, conv.inputs[index]], [out.name],
                                {"activation": conv.attrs.get("activation", 0)}))
        conv.inputs = conv.inputs[:index]
        while conv.inputs[-1] == "":                       # the empty bias slot the residual needed
            conv.inputs.pop()
        conv.attrs = {**conv.attrs, "activation": 0}
        conv.outputs = [own, *conv.outputs[1:]]
    graph.sort()
    return graph


def require_split(graph: Graph) -> None:
    """ValueError naming the first node that still carries a residual sum: the quantizer's layer-by-layer tools
    (bias correction, AdaRound) compare each layer's own output, which a fused conv does not expose."""
    for node in graph.nodes:
        if _residual_index(node) is not None:
            raise ValueError(f"node '{node.name}' carries a fused residual sum: split_residuals(graph) first")
