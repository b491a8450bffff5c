"""bprop rules of the vision ops: GridSample (differentiable in both the image and the grid)."""
from __future__ import annotations

from converter.train.bprop.rule import Bprop, Grads, bprop


@bprop("GridSample")
def grid_sample(g: Bprop) -> Grads:
    return g.grads("GridSampleGrad", [g.dy, *g.node.inputs[:2]], [0, 1])
