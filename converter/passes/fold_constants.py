"""fold_constants: evaluate every node whose inputs are known (shape subgraphs included) and drop dead code."""
from __future__ import annotations

from converter.ir import Graph
from converter.shape_inference import infer_graph


def fold_constants(graph: Graph) -> None:
    infer_graph(graph)
    graph.prune()
