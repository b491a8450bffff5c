"""The converter's graph IR: named values (shape, dtype, optional constant) and nodes of our canonical ops.

Every intermediate graph is executable: passes rewrite it while keeping its meaning, so each can be tested
alone by running the graph before and after.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from lite.kernel import TensorSpec
from lite.rewrites import topological_order
from lite.status import GraphFileError
from schema import fb


@dataclass
class Value:
    """A tensor of the graph. `shape` uses -1 for dims unknown until run time; `const` holds constants."""
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    const: np.ndarray | None = None
    format: int = fb.Format.ND
    probes: tuple[TensorSpec, TensorSpec] | None = None   # specs under two settings of the unknown dims
    quant_params: list[Any] = field(default_factory=list)  # fb.QuantParamT: one, or one per channel
    quant_axis: int = 0
    source_perm: tuple[int, ...] = ()     # for weights stored transposed: the permutation back to the source
    dynamic: bool = False    # computed by a node whose shapes are known only at run time: every dim is -1
    variable: bool = False   # state an Assign writes: `const` is its initial value, never folded through

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def static(self) -> bool:
        return all(d >= 0 for d in self.shape)


@dataclass
class Node:
    """One op. `inputs` may contain "" for an omitted optional input; `attrs` are schema field values.
    A control-flow node's `bodies` are its subgraphs, in the order of `traits(op).bodies.attrs` (the exporter
    turns them into subgraph indices); each is a self-contained Graph whose last inputs receive the node's
    captured (`implicit_inputs`) values."""
    op: str
    name: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    bodies: list["Graph"] = field(default_factory=list)
    quant_type: int = 0          # fb.QuantType: DYNAMIC marks a node that quantizes its float input per run
    rounding: str = "tflite"     # an int8 node's requantization rule (`NodeDef.rounding`)


@dataclass
class SubGraph:
    """A named part of the graph, run on its own (training models: "eval", "gradients", "optimizer")."""
    name: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[Node]


class Graph:
    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self.values: dict[str, Value] = {}
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.subgraphs: list[SubGraph] = []
        self.source_types: dict[str, tuple[np.dtype, int]] = {}   # (dtype, rank) of values, from the source
        self.dim_names: dict[str, tuple[str, ...]] = {}   # graph input -> its dims' source names ("": known)
        self._counter = itertools.count()
        self._issued: set[str] = set()

    # ---- names and values ------------------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """A name not used by any value nor handed out before, derived from `hint` (node names come from here)."""
        name = hint
        while not name or name in self.values or name in self._issued:
            name = f"{hint}_{next(self._counter)}"
        self._issued.add(name)
        return name

    def add_const(self, array: np.ndarray, hint: str = "const") -> str:
        array = np.ascontiguousarray(array).reshape(np.shape(array))   # keeps 0-d arrays 0-d
        name = self.fresh(hint)
        self.values[name] = Value(name, tuple(array.shape), array.dtype, array)
        return name

    def const(self, name: str) -> np.ndarray | None:
        """The constant value of `name`, or None when it is computed at run time (or absent)."""
        v = self.values.get(name)
        return None if v is None or v.variable else v.const

    # ---- structure --------------------------------------------------------------------------------------------
    def producer(self, name: str) -> Node | None:
        return next((n for n in self.nodes if name in n.outputs), None)

    def consumers(self, name: str) -> list[Node]:
        return [n for n in self.nodes if name in n.inputs]

    def uses(self, name: str) -> int:
        """How many places read `name` (node inputs and graph outputs)."""
        return sum(n.inputs.count(name) for n in self.nodes) + self.outputs.count(name)

    def replace_uses(self, old: str, new: str) -> None:
        """Make every reader of `old` read `new` instead."""
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
        self.outputs = [new if o == old else o for o in self.outputs]

    def rename_value(self, old: str, new: str) -> None:
        """Rename value `old` to the unused name `new` everywhere (keeps graph output names stable)."""
        value = self.values.pop(old)
        value.name = new
        self.values[new] = value
        for n in self.nodes:
            n.inputs = [new if i == old else i for i in n.inputs]
            n.outputs = [new if o == old else o for o in n.outputs]
        self.inputs = [new if i == old else i for i in self.inputs]
        self.outputs = [new if o == old else o for o in self.outputs]

    def remove_node(self, node: Node) -> None:
        self.nodes.remove(node)

    def prune(self) -> None:
        """Drop nodes and constants that no graph output depends on (nodes without outputs, such as
        optimizers that update weights in place, are always kept)."""
        live = set(self.outputs)
        kept = []
        for node in reversed(self.topological()):
            if not node.outputs or any(o in live for o in node.outputs):
                kept.append(node)
                live.update(i for i in node.inputs if i)
        self.nodes = kept[::-1]
        produced = {o for n in self.nodes for o in n.outputs}
        self.values = {k: v for k, v in self.values.items()
                       if k in live or k in produced or k in self.inputs}
        kept_ids = {id(n) for n in self.nodes}
        for sg in self.subgraphs:
            sg.nodes = [n for n in sg.nodes if id(n) in kept_ids]

    def topological(self) -> list[Node]:
        """The nodes in execution order (the current order when it is one: `lite.rewrites.topological_order`)."""
        ready = set(self.inputs) | {k for k, v in self.values.items() if v.const is not None} | {""}
        order = topological_order([[i for i in n.inputs if i not in ready] for n in self.nodes],
                                  [n.outputs for n in self.nodes])
        if len(order) != len(self.nodes):
            placed = set(order)
            stuck = next(n for k, n in enumerate(self.nodes) if k not in placed)
            raise GraphFileError(f"graph has a cycle or a dangling input at node '{stuck.name}'")
        return [self.nodes[k] for k in order]

    def sort(self) -> None:
        self.nodes = self.topological()

    def op_nodes(self, *ops: str) -> Iterable[Node]:
        """Snapshot of the nodes of the given ops (safe to mutate the graph while iterating)."""
        return [n for n in self.nodes if n.op in ops]
