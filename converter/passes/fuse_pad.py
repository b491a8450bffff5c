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
    """Every reader of the Pad must absorb it (MediaPipe's pose detector feeds one Pad to two convs)."""
    for pad_node in graph.op_nodes("Pad"):
        readers = graph.consumers(pad_node.outputs[0])
        pads = _spatial_pads(graph, pad_node)
        if (pads is None or not readers or pad_node.outputs[0] in graph.outputs
                or any(not traits(conv.op).absorbs_pad or conv.inputs.count(pad_node.outputs[0]) != 1
                       or conv.inputs[0] != pad_node.outputs[0]
                       or conv.attrs.get("pad_mode", fb.PadMode.PAD) not in (fb.PadMode.PAD, fb.PadMode.VALID)
                       for conv in readers)):
            continue
        for conv in readers:
            if conv.attrs.get("pad_mode") == fb.PadMode.VALID:      # no padding of its own: the Pad's is all of it
                conv.attrs.update(pad_mode=fb.PadMode.PAD, pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)
            for key, extra in zip(("pad_top", "pad_bottom", "pad_left", "pad_right"), pads):
                conv.attrs[key] = conv.attrs.get(key, 0) + extra
            conv.inputs[0] = pad_node.inputs[0]
    graph.prune()
