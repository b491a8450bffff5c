"""A machine-independent estimate of the quantization's time, so that `preset=AUTO` decides the same on every
machine and at every load: the same model and calibration set give the same methods and the same file.

The estimate counts work from the graph alone (multiply-adds of its products and elements of its activations per
sample, AdaRound's steps from the layers' shapes) and turns it into seconds with fixed rates of the reference
machine: two cores of an x86 server with OpenBLAS. The rates were fitted to the CPU time (user + sys) of
EfficientNet-Lite0's phases measured there (docs/quantization.md, "Default methods"): most of the work runs on one
thread, so on two idle cores the CPU time bounds the wall time. A faster or busier machine takes less or more time
than estimated, but chooses the same.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from converter.ir import Graph
from lite.traits import traits

REFERENCE_RATES = (4.6e10, 4.0e9)    # AdaRound: float32 multiply-adds per second at one BLAS thread, and
                                     # elements per second of an elementwise pass (`adaround.estimate_seconds`)
PASS_MACS = 4.0e10                   # a graph pass over one sample: multiply-adds per second through the runtime,
PASS_ELEMENTS = 4.2e8                # plus activation elements per second (kernel calls, observers, copies)
DONE_PASSES = 3.7                    # passes over the calibration set before AdaRound is decided: equalization's
                                     # channel ranges, the calibration, KL's thresholds, the range choice's int8
                                     # runs and builds (EfficientNet-Lite0, 32 samples: 3.1 s = 3.7 x 0.85 s)


@dataclass(frozen=True)
class GraphWork:
    """What one float pass over one sample does: multiply-adds of the products and activation elements."""
    macs: int
    elements: int

    def pass_seconds(self, samples: int) -> float:
        """Reference seconds of one pass over `samples` samples."""
        return samples * (self.macs / PASS_MACS + self.elements / PASS_ELEMENTS)


def graph_work(graph: Graph) -> GraphWork:
    """Products with a constant weight (Conv2D, FullConnection, MatMul) count output elements x weights per
    output channel, MatMul of two activations output elements x depth; unknown dims count as 1."""
    macs = elements = 0
    for node in graph.nodes:
        sizes = [_size(graph, name) for name in node.outputs if name]
        elements += sum(sizes)
        index = traits(node.op).weight_input
        w = graph.const(node.inputs[index]) if index is not None and len(node.inputs) > index else None
        if w is not None and w.ndim:
            macs += sizes[0] * w.size // max(w.shape[traits(node.op).weight_axis % w.ndim], 1)
        elif node.op == "MatMul" and len(node.inputs) > 1 and sizes:
            a = graph.values[node.inputs[0]].shape
            if a:
                depth = a[-2] if node.attrs.get("transpose_a") and len(a) > 1 else a[-1]
                macs += sizes[0] * max(depth, 1)
    return GraphWork(int(macs), int(elements))


def _size(graph: Graph, name: str) -> int:
    shape = graph.values[name].shape if name in graph.values else ()
    return int(np.prod([max(d, 1) for d in shape], dtype=np.int64)) if shape is not None else 1
