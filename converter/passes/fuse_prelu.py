"""fuse_prelu: PReLU(conv(x), slope) -> conv(x, w, b, r, slope) for a float32 Conv2D with no activation of its
own, when the slope holds one value per output channel (NHWC: its shape is [C] or [1, ..., 1, C] or one value).
The conv's epilogue then applies the slope where it writes the output, instead of another pass that reads and
writes the whole tensor (MediaPipe's face mesh runs 23 PReLUs, 0.8 of its 2.0 ms at batch 1, 2 threads); a fused
residual sum (`fuse_residual`, which runs first) comes before the slope, as in the unfused graph.

The slope is the conv's input `SLOPE_INPUT` (an omitted bias or residual stays ""). Training graphs never run
this pass, and the quantizer splits the PReLU off again (`split_prelu`): the int8 conv has no slope.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.match import only_reader

SLOPE_INPUT = 4          # after x, w, bias and the residual sum
OPS = ("Conv2D",)


def per_channel(slope: np.ndarray | None, channels: int) -> np.ndarray | None:
    """The slope as [channels] float32 when it has one value per channel of an NHWC tensor (or one value)."""
    if slope is None or slope.dtype != np.float32 or any(d != 1 for d in slope.shape[:-1]):
        return None
    if slope.size not in (1, channels):
        return None
    return np.ascontiguousarray(np.broadcast_to(slope.reshape(-1), (channels,)))


def fuse_prelu(graph: Graph) -> None:
    for conv in list(graph.nodes):
        out = conv.outputs[0] if conv.outputs else ""
        value = graph.values.get(out)
        if (conv.op not in OPS or conv.attrs.get("activation", 0) or len(conv.inputs) > SLOPE_INPUT
                or value is None or value.dtype != np.float32 or value.rank != 4 or value.shape[-1] < 1):
            continue
        prelu = only_reader(graph, out, "PReLU")
        if prelu is None or len(prelu.inputs) != 2 or prelu.inputs[0] != out:
            continue
        slope = per_channel(graph.const(prelu.inputs[1]), value.shape[-1])
        if slope is None:
            continue
        conv.inputs += [""] * (SLOPE_INPUT - len(conv.inputs))
        conv.inputs.append(graph.add_const(slope, f"{conv.name}/slope"))
        graph.remove_node(prelu)
        graph.values.pop(prelu.outputs[0])
        graph.rename_value(out, prelu.outputs[0])     # the conv now makes the PReLU's output, under its name
        if not graph.uses(prelu.inputs[1]):
            graph.values.pop(prelu.inputs[1])
    graph.sort()


def split_prelu(graph: Graph) -> Graph:
    """The inverse: every fused slope becomes a PReLU node of its own again, reading the conv's output."""
    for conv in list(graph.nodes):
        if conv.op not in OPS or len(conv.inputs) <= SLOPE_INPUT or not conv.inputs[SLOPE_INPUT]:
            continue
        out = graph.values[conv.outputs[0]]
        own = graph.fresh(f"{out.name}_before_prelu")
        graph.values[own] = Value(own, out.shape, out.dtype, format=out.format)
        slope = conv.inputs[SLOPE_INPUT]
        graph.nodes.append(Node("PReLU", graph.fresh(f"{conv.name}/prelu"), [own, slope], [out.name]))
        conv.inputs = conv.inputs[:SLOPE_INPUT]
        while conv.inputs and conv.inputs[-1] == "":            # the empty slots the slope needed
            conv.inputs.pop()
        conv.outputs = [own, *conv.outputs[1:]]
    graph.sort()
    return graph
