"""Which nodes are per-channel linear layers, read from the op traits (never from op names): the one rule that
cross-layer equalization and AdaRound share.

A linear layer computes output channel o as the input times the weight's row o plus bias o: its weight is input 1
with output channels on axis 0 and input channels (OHWI: after the spatial taps) on the last axis, and input 2 is
a per-output-channel bias. Today that is Conv2D (OHWI) and FullConnection ([out, in]); MatMul and
Conv2DTranspose keep their output channels on the last weight axis and are not linear layers in this sense.
"""
from __future__ import annotations

from converter.ir import Node
from lite.traits import traits


def linear_layer(node: Node) -> bool:
    """Weight input 1 (output channels on axis 0, input channels last) and a per-output-channel bias input 2."""
    t = traits(node.op)
    return t.weight_input == 1 and t.weight_axis == 0 and t.bias_input == 2


def depthwise(node: Node) -> bool:
    """A grouped layer with one input and one output channel per group: weight [C, KH, KW, 1]."""
    a = node.attrs
    return a.get("group", 1) > 1 and a.get("group") == a.get("in_channel") == a.get("out_channel")


def dense_or_depthwise(node: Node) -> bool:
    """A linear layer whose channels mix fully (no groups) or not at all (depthwise): the two forms the
    per-channel methods handle; other grouped layers are left alone."""
    return linear_layer(node) and (node.attrs.get("group", 1) == 1 or depthwise(node))


def pads(node: Node) -> bool:
    """Whether the layer may pad its input: explicit pads, or any pad mode (SAME pads; VALID counts too, to be
    safe). A padded border reads zeros, not the input's values."""
    a = node.attrs
    return a.get("pad_mode", 0) != 0 or any(a.get(k, 0) for k in ("pad_top", "pad_left", "pad_bottom", "pad_right"))
