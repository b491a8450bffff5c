"""IR graph -> model file bytes, written in the format MindSpore Lite's `--saveType` names.

`SAVE_TYPES` names, for each save type, the `lite.format` module whose `write` turns the runtime's graph
definitions into that format's bytes, so another output format is its module plus one line there. `MSPY`, our
`.ms` format, is the default; `MINDIR_LITE` is MindSpore Lite's own `.ms`; any other save type (MindSpore Lite's
`MINDIR` too) is refused, naming the known ones.

The graph is flattened once, whatever the format. Control-flow bodies join the one tensor table and node list:
each body becomes a subgraph of the file (appended after the training parts) and its node refers to it by index. Tensor names stay the source
model's, prefixed with the subgraph's name where a body reuses a name; a constant captured by a body is the same
tensor as outside it.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import NamedTuple

from converter.ir import Graph, Node, Value
from converter.shape_inference import make_attrs
from lite import dtypes
from lite.model import NodeDef, SubGraphDef, TensorDef
from lite.status import NotSupportedError
from lite.traits import traits
from schema import FMK_ONNX, fb


class SaveType(NamedTuple):
    module: str    # a `lite.format` module with write(name, tensors, nodes, inputs, outputs, subgraphs, fmk_type)
    title: str     # how --help and messages name it


SAVE_TYPES: dict[str, SaveType] = {
    "MSPY": SaveType("lite.format.mspy", "our .ms format, the default"),
    "MINDIR_LITE": SaveType("lite.format.mindspore_lite.writer", "MindSpore Lite's own .ms, for its runtime"),
}
DEFAULT_SAVE_TYPE = "MSPY"


def writer(save_type: str) -> ModuleType:
    """The format module that writes `save_type`; `NotSupportedError` naming the known save types."""
    known = SAVE_TYPES.get(save_type)
    if known is None:
        names = ", ".join(f"{name} ({k.title})" for name, k in SAVE_TYPES.items())
        raise NotSupportedError(f"--saveType={save_type} is not supported; known: {names}")
    return importlib.import_module(known.module)


def _tensor_def(index: int, name: str, value: Value, node_type: int, dim_names: tuple[str, ...] = ()) -> TensorDef:
    """`dim_names` (the source's names of a graph input's dims) are kept only while every named dim is still
    unknown: a pass that fixed or moved one leaves the input unnamed rather than misnamed."""
    named = len(dim_names) == len(value.shape) and all(d < 0 for n, d in zip(dim_names, value.shape) if n)
    return TensorDef(index, name, node_type, dtypes.from_numpy(value.dtype), tuple(value.shape),
                     value.format, value.const, list(value.quant_params), value.quant_axis,
                     tuple(value.source_perm), dim_names if named else ())


class _Flat:
    """The file's tensors, nodes (the main graph's first) and subgraphs, built graph by graph."""

    def __init__(self, parts: int):
        self.tensors: list[TensorDef] = []
        self.names: set[str] = set()
        self.shared: dict[int, int] = {}        # id of a constant array -> its tensor
        self.body_nodes: list[NodeDef] = []
        self.bodies: list[SubGraphDef] = []
        self.parts = parts                      # subgraphs before the first body (training parts)

    def name(self, name: str, prefix: str) -> str:
        unique, k = name, 0
        while unique in self.names:
            unique = f"{prefix}/{name}" + (f"_{k}" if k else "")
            k += 1
        self.names.add(unique)
        return unique

    def graph(self, graph: Graph, prefix: str, body: bool = False) -> tuple[dict[str, int], list[NodeDef]]:
        """Index the tensors and build the nodes of `graph` (its bodies, recursively, onto `self.bodies`); a
        body reads the constants it shares with the graphs before it from their tensors."""
        graph.sort()
        index: dict[str, int] = {}
        inputs = set(graph.inputs)
        for name in [*graph.inputs, *(i for n in graph.nodes for i in (*n.inputs, *n.outputs)), *graph.outputs]:
            if not name or name in index:
                continue
            value = graph.values[name]
            if body and value.const is not None and id(value.const) in self.shared:
                index[name] = self.shared[id(value.const)]
                continue
            kind = (fb.NodeType.VALUE if value.const is not None else
                    fb.NodeType.PARAMETER if name in inputs else fb.NodeType.CNODE)
            index[name] = len(self.tensors)
            self.tensors.append(_tensor_def(index[name], self.name(name, prefix), value, kind,
                                            graph.dim_names.get(name, ()) if name in inputs else ()))
            if value.const is not None:
                self.shared[id(value.const)] = index[name]
        return index, [self.node(n, index) for n in graph.nodes]

    def node(self, n: Node, index: dict[str, int]) -> NodeDef:
        attrs = dict(n.attrs)
        spec = traits(n.op).bodies
        for attr, body in zip(spec.attrs if spec else (), n.bodies):
            name = f"{n.name}/{attr}"
            inner, nodes = self.graph(body, name, body=True)
            self.body_nodes += nodes
            attrs[attr] = self.parts + len(self.bodies)
            self.bodies.append(SubGraphDef(name, [inner[i] for i in body.inputs], [inner[o] for o in body.outputs],
                                           nodes))
        return NodeDef(n.name, n.op, make_attrs(n.op, attrs), [index[i] if i else -1 for i in n.inputs],
                       [index[o] for o in n.outputs], n.quant_type, rounding=n.rounding)


def to_bytes(graph: Graph, fmk_type: int = FMK_ONNX, save_type: str = DEFAULT_SAVE_TYPE) -> bytes:
    """`graph` (already optimised) as the bytes of `save_type`'s format; `fmk_type`: the source framework."""
    write = writer(save_type).write
    flat = _Flat(len(graph.subgraphs))
    index, nodes = flat.graph(graph, graph.name)
    node_of = {id(n): nd for n, nd in zip(graph.nodes, nodes)}
    parts = [SubGraphDef(sg.name, [index[i] for i in sg.inputs], [index[o] for o in sg.outputs],
                         [node_of[id(n)] for n in sg.nodes]) for sg in graph.subgraphs]
    return write(graph.name, flat.tensors, [*nodes, *flat.body_nodes], [index[i] for i in graph.inputs],
                 [index[o] for o in graph.outputs], [*parts, *flat.bodies], fmk_type)
