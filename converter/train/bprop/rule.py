"""The bprop registry: one rule per forward op, found by name, and the context a rule writes its gradient ops with.

A rule `rule(g: Bprop) -> list[str | None]` returns the gradient of each forward input in order (None, or a
shorter list, where an input needs none). It may emit gradient nodes (`g.grad`, `g.grads`) or return an existing
value (Identity: the upstream gradient itself). Gradient ops repeat the forward op's attribute fields, so `emit`
starts from the forward attributes the emitted op has and lets a rule override them.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from converter.ir import Graph, Node, Value
from schema import attrs as op_attrs

Grads = list[str | None]
Rule = Callable[["Bprop"], Grads]
RULES: dict[str, Rule] = {}
WRT: dict[str, tuple[int, ...] | None] = {}    # the inputs an op is differentiable in (None: all)


def bprop(*ops: str, wrt: tuple[int, ...] | None = None) -> Callable[[Rule], Rule]:
    """Register the bprop rule of forward ops; `wrt` lists the input positions gradients can flow to."""
    def wrap(rule: Rule) -> Rule:
        for op in ops:
            if op in RULES:
                raise RuntimeError(f"bprop rule for {op} registered twice")
            RULES[op], WRT[op] = rule, wrt
        return rule
    return wrap


def differentiable(op: str, position: int) -> bool:
    """Whether a gradient can flow into input `position` of `op` (ops without a rule: every input, so that a
    path through them is reported rather than silently cut)."""
    wrt = WRT.get(op)
    return wrt is None or position in wrt


class Bprop:
    """What a rule sees: the forward node, the gradients of its outputs (`dys`, None where an output has none)
    and which inputs need a gradient; emitted nodes are appended to the graph and named after `prefix` (the
    forward node's name)."""

    def __init__(self, graph: Graph, node: Node, dys: list[str | None], needed: list[bool], prefix: str):
        self.graph, self.node, self.dys, self.needed, self.prefix = graph, node, dys, needed, prefix

    @property
    def dy(self) -> str:
        """The gradient of the first output (every rule but Split's has one)."""
        return self.dys[0]

    def needs(self, i: int) -> bool:
        return i < len(self.needed) and self.needed[i]

    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def emit(self, op: str, inputs: Sequence[str], like: Sequence[str | Value], hints: Sequence[str] | None = None,
             **attrs: Any) -> list[str]:
        """Append `op` on `inputs`; returns its output names (fresh names from `hints`). Output k has the shape,
        dtype and format of `like[k]` (a value or its name)."""
        fields = op_attrs.field_names(op)
        merged = {k: v for k, v in self.node.attrs.items() if k in fields} | attrs
        hints = hints or [f"{self.prefix}/{op}:{k}" for k in range(len(like))]
        names = []
        for hint, model in zip(hints, like):
            v = self.value(model) if isinstance(model, str) else model
            names.append(self.graph.fresh(hint))
            self.graph.values[names[-1]] = Value(names[-1], v.shape, v.dtype, format=v.format)
        self.graph.nodes.append(Node(op, self.graph.fresh(f"{self.prefix}/{op}"), list(inputs), names, merged))
        return names

    def grads(self, op: str, inputs: Sequence[str], wrt: Sequence[int], **attrs: Any) -> Grads:
        """One `op` node whose outputs are the gradients of the forward inputs `wrt`; returns the gradient of
        every forward input (None for those not needed; the op still writes them, under throwaway names)."""
        if not any(self.needs(i) for i in wrt):
            return []
        xs = [self.node.inputs[i] for i in wrt]
        hints = [f"{x}/grad" if self.needs(i) else f"{self.prefix}/unused_grad_{i}" for i, x in zip(wrt, xs)]
        names = self.emit(op, inputs, xs, hints, **attrs)
        out: Grads = [None] * len(self.node.inputs)
        for i, name in zip(wrt, names):
            out[i] = name if self.needs(i) else None
        return out

    def grad(self, op: str, inputs: Sequence[str], i: int, **attrs: Any) -> str | None:
        """The gradient of forward input `i` as the single output of `op` (nothing emitted when not needed)."""
        return self.grads(op, inputs, [i], **attrs)[i] if self.needs(i) else None
