"""Cross-layer equalization with bias absorption before calibration (`cross_layer_equalization=true`): the
float graph's Conv2D/FullConnection chains rebalanced by `converter.passes.equalize`; bias absorption centres
the middle tensors' channels by their ranges on the calibration samples."""
from __future__ import annotations

import sys

import numpy as np

from converter.ir import Graph
from converter.passes.equalize import absorb_biases, absorption_pairs, equalize
from converter.quant.calibration import channel_ranges


def equalize_for_quantization(graph: Graph, samples: list[dict[str, np.ndarray]]) -> Graph:
    """Equalize and absorb biases in `graph` (mutated and returned); the counts go to stderr."""
    count = equalize(graph)
    middles = {p.middle for p in absorption_pairs(graph)}
    absorbed = absorb_biases(graph, channel_ranges(graph, samples, middles)) if middles else 0
    print(f"cross-layer equalization: {count} layer pairs equalized, {absorbed} with biases absorbed",
          file=sys.stderr)
    return graph
