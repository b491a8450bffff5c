"""What the importer rules of every frontend share: emitting IR nodes for the source node being imported.

Each emitted node is inferred at once through the runtime's shape rules and folded when its inputs are
constant, so a rule sees the shapes (and constant values) of everything it has emitted.
"""
from __future__ import annotations

import dataclasses
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

    def emit_control(self, op: str, inputs: list[str], outputs: list[Value], bodies: list[Graph],
                     **attrs: Any) -> None:
        """Add a control-flow node running `bodies`, with the output values its rule derived from them (the
        runtime compiles the bodies; the converter's shape inference keeps these)."""
        for value in outputs:
            self.graph.values[value.name] = value
        name = self.graph.fresh(self.name)
        self.graph.nodes.append(Node(op, name, list(inputs), [v.name for v in outputs], attrs, list(bodies)))

    def inline(self, body: Graph, inputs: list[str], outputs: list[str]) -> None:
        """Splice the nodes of `body` into the graph, its inputs reading `inputs` and its outputs written to
        `outputs` (a branch taken whatever the data: If on a constant condition). Its other values get fresh
        names; every spliced node is inferred (and folded) in its new place."""
        rename = dict(zip(body.inputs, inputs))
        for out, target in zip(body.outputs, outputs):
            if out not in rename and body.producer(out) is not None:
                rename[out] = target
        for node in body.topological():
            for i in node.inputs:
                if i and i not in rename:
                    rename[i] = self._inlined(body.values[i])
            ins = [rename[i] if i else "" for i in node.inputs]
            outs = [rename.setdefault(o, self.graph.fresh(o)) for o in node.outputs]
            for o, new in zip(node.outputs, outs):
                self.graph.values[new] = dataclasses.replace(body.values[o], name=new, probes=None)
            spliced = Node(node.op, self.graph.fresh(f"{self.name}/{node.name}"), ins, outs, dict(node.attrs),
                           list(node.bodies))
            self.graph.nodes.append(spliced)
            if infer_node(self.graph, spliced):
                self.graph.remove_node(spliced)
        for out, target in zip(body.outputs, outputs):
            source = rename.get(out) or self._inlined(body.values[out])
            if source != target:        # a branch output that is an input or a constant of it
                self.emit("Identity", [source], [target])

    def _inlined(self, value: Value) -> str:
        """A constant of an inlined body, as a constant of the graph."""
        if value.const is None:
            raise self.error(f"inlined subgraph value '{value.name}' is neither produced nor constant")
        return self.graph.add_const(value.const, value.name)
