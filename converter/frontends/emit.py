"""What the importer rules of every frontend share: emitting IR nodes for the source node being imported.

Each emitted node is inferred at once through the runtime's shape rules and folded when its inputs are
constant, so a rule sees the shapes (and constant values) of everything it has emitted.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from converter.ir import Graph, Node, Value
from converter.shape_inference import infer_node
from lite.status import LiteError, NotSupportedError


class EmitContext:
    """The graph being built and the name of the source node being imported (`name`); frontends add readers
    for their node and an `error` that names it."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.name = ""

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"node '{self.name}': {message}")

    # ---- values -------------------------------------------------------------------------------------------------
    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.const(name) if name else None

    def require_const(self, name: str, what: str) -> np.ndarray:
        value = self.const(name)
        if value is None:
            raise self.error(f"{what} must be a constant (or computable from static shapes)")
        return value

    def add_const(self, array: np.ndarray, hint: str = "const") -> str:
        return self.graph.add_const(array, f"{self.name}/{hint}")

    # ---- emitting IR --------------------------------------------------------------------------------------------
    def emit(self, op: str, inputs: list[str], outputs: list[str] | int = 1, **attrs: Any) -> list[str]:
        """Add one IR node and infer it at once (folding it when its inputs are constant).
        `outputs` is a list of names or a count of fresh names."""
        if isinstance(outputs, int):
            outputs = [self.graph.fresh(f"{self.name}:{op}:{k}") for k in range(outputs)]
        for o in outputs:
            self.graph.values.setdefault(o, Value(o, (), np.dtype(np.float32)))
        taken = any(n.name == self.name for n in self.graph.nodes)
        name = self.graph.fresh(f"{self.name}/{op}" if taken or op == "Transpose" else self.name)
        node = Node(op, name, list(inputs), list(outputs), attrs)
        self.graph.nodes.append(node)
        try:
            folded = infer_node(self.graph, node)
        except LiteError as e:
            raise self.error(e.args[0], type(e)) from e
        if folded:
            self.graph.remove_node(node)
        return outputs

    def emit1(self, op: str, inputs: list[str], output: str | None = None, **attrs: Any) -> str:
        return self.emit(op, inputs, [output] if output else 1, **attrs)[0]
