"""fuse_pad: a constant zero Pad of only H and W in front of a Conv2D (an op with `traits(op).absorbs_pad`)
becomes the convolution's own padding.

PyTorch exports of TF-style "same" convolutions (EfficientNet-Lite) pad explicitly before every strided conv,
and TFLite files (MediaPipe's pose and palm detectors) put a ZeroPadding2D before a VALID one; folding the pad
saves a full copy of the activation per conv (a VALID conv becomes a PAD one with the Pad's amounts).
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph
from lite.traits import traits
from schema import fb


def _spatial_pads(graph: Graph, pad_node) -> tuple[int, int, int, int] | None:
    """(top, bottom, left, right) when the Pad is a non-negative constant-zero pad of NHWC H/W only."""
    pads = graph.const(pad_node.inputs[1]) if len(pad_node.inputs) > 1 else None
    value = graph.const(pad_node.inputs[2]) if len(pad_node.inputs) > 2 and pad_node.inputs[2] else np.zeros(1)
    if (pad_node.attrs.get("mode", 0) != fb.PaddingFill.CONSTANT or pads is None or value is None
            or np.any(value != 0) or pads.size != 8 or np.any(pads < 0)):
        return None
    begins, ends = pads.ravel()[:4], pads.ravel()[4:]
    if begins[0] or begins[3] or ends[0] or ends[3]:
        return None
    return int(begins[1]), int(ends[1]), int(begins[2]), int(ends[2])


def fuse_pad(graph: Graph) -> None:
    for conv in [n for n in graph.nodes if traits(n.op).absorbs_pad]:
        pad_node = graph.producer(conv.inputs[0])
        if (pad_node is None or pad_node.op != "Pad" or graph.uses(conv.inputs[0]) != 1
                or conv.attrs.get("pad_mode", fb.PadMode.PAD) not in (fb.PadMode.PAD, fb.PadMode.VALID)):
            continue
        pads = _spatial_pads(graph, pad_node)
        if pads is None:
            continue
        if conv.attrs.get("pad_mode") == fb.PadMode.VALID:      # no padding of its own: the Pad's is all of it
            conv.attrs.update(pad_mode=fb.PadMode.PAD, pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
        for key, extra in zip(("pad_top", "pad_bottom", "pad_left", "pad_right"), pads):
            conv.attrs[key] = conv.attrs.get(key, 0) + extra
        conv.inputs[0] = pad_node.inputs[0]
    graph.prune()
