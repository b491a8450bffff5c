"""The ONNX importer registry: one rule per ONNX op type, found by name (`IMPORTERS["Conv"]`); an op of another
domain by its qualified name (`IMPORTERS["com.microsoft.Gelu"]`)."""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter.frontends.emit import EmitContext
from converter.ir import Graph, Value
from lite.status import GraphFileError, LiteError, NotSupportedError

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


DEFAULT_DOMAINS = ("", "ai.onnx")
MICROSOFT = "com.microsoft"


def qualified(op_type: str, domain: str = "") -> str:
    """The registry key of `op_type` in `domain`: the bare name in the default domain."""
    return op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"


class ImportContext(EmitContext):
    """What an importer rule sees: the ONNX node being imported and helpers to emit IR for it. The context of a
    control-flow body has the context of the graph around it as `parent`, from which it captures the outer-scope
    values its nodes read."""

    def __init__(self, graph: Graph, opset: int, parent: "ImportContext | None" = None,
                 domain_opsets: dict[str, int] | None = None):
        super().__init__(graph)
        self.default_opset = opset
        self.domain_opsets = domain_opsets if domain_opsets is not None else parent.domain_opsets if parent else {}
        self.node: onnx.NodeProto | None = None
        self.parent = parent
        self.readers: collections.Counter[str] = collections.Counter()    # nodes reading each value, by name

    # ---- walking a graph -----------------------------------------------------------------------------------------
    def import_nodes(self, g: onnx.GraphProto) -> None:
        """Apply one importer rule per node of `g`, in order."""
        self.readers = collections.Counter(i for node in g.node for i in node.input if i)
        for index, node in enumerate(g.node):
            self.node, self.name = node, node.name or f"{node.op_type}_{index}"
            op = qualified(node.op_type, node.domain)
            rule = IMPORTERS.get(op)
            if rule is None:
                raise NotSupportedError(f"Unsupported ONNX op '{op}' at node '{self.name}' ({self.opset_name})")
            missing = [i for i in node.input if i and not self.capture(i)]
            if missing:
                raise GraphFileError(f"ONNX node '{self.name}' reads '{missing[0]}', which is not produced before it")
            try:
                rule(self)
            except LiteError:
                raise
            except (ValueError, TypeError, KeyError, IndexError) as e:
                raise self.error(f"cannot import: {e}") from e

    def capture(self, name: str) -> bool:
        """Make the value `name` readable in this graph: its own, or an outer-scope value captured from the
        enclosing graphs (a constant is copied in; any other value becomes a trailing input of the body, which
        its control-flow node passes in). False when no scope has it."""
        if name in self.graph.values:
            return True
        if self.parent is None or not self.parent.capture(name):
            return False
        outer = self.parent.graph.values[name]
        if outer.const is not None:
            self.graph.values[name] = dataclasses.replace(outer)    # the same array: one tensor in the file
        else:
            self.graph.values[name] = Value(name, outer.shape, outer.dtype, format=outer.format, dynamic=outer.dynamic)
            self.graph.inputs.append(name)
        return True

    def subgraph(self, g: onnx.GraphProto, inputs: list[Value]) -> Graph:
        """Import the body `g` of the node being imported, its inputs having the shapes and dtypes of `inputs`
        (placeholders: a body never folds on them). Outer-scope values it reads are captured: they follow
        its own inputs, their names those of the outer values (`captured`)."""
        if len(g.input) != len(inputs):
            raise self.error(f"subgraph '{g.name}' has {len(g.input)} inputs, {len(inputs)} expected",
                             GraphFileError)
        body = Graph(g.name or f"{self.name}/body")
        body.source_types = self.graph.source_types
        for init in g.initializer:
            array = numpy_helper.to_array(init)
            body.values[init.name] = Value(init.name, tuple(array.shape), array.dtype,
                                           np.ascontiguousarray(array).reshape(array.shape))
        for vi, v in zip(g.input, inputs):
            body.values[vi.name] = Value(vi.name, v.shape, v.dtype, format=v.format, dynamic=v.dynamic)
            body.inputs.append(vi.name)
        inner = ImportContext(body, self.default_opset, self)
        inner.import_nodes(g)
        missing = [o.name for o in g.output if not inner.capture(o.name)]
        if missing:
            raise GraphFileError(f"subgraph '{g.name}' of ONNX node '{self.name}' outputs '{missing[0]}', which "
                                 f"nothing produces")
        body.outputs = [o.name for o in g.output]
        body.prune()
        return body

    def delegate(self, op_type: str, inputs: list[str], outputs: list[str], opset: int | None = None,
                 **attrs: Any) -> None:
        """Import a default-domain `op_type` node (at `opset`, the model's by default) in place of part of the
        node being imported: the rules of fused and contrib ops reuse the rules of the ops they fuse."""
        node, default = self.node, self.default_opset
        self.node = helper.make_node(op_type, inputs, outputs, name=node.name,
                                     **{k: v for k, v in attrs.items() if v is not None})
        self.default_opset = opset or default
        try:
            IMPORTERS[op_type](self)
        finally:
            self.node, self.default_opset = node, default

    # ---- reading the ONNX node ---------------------------------------------------------------------------------
    @property
    def opset(self) -> int:
        """The opset of the node's own domain (0 when the model imports none for it)."""
        if self.node is None or self.node.domain in DEFAULT_DOMAINS:
            return self.default_opset
        return self.domain_opsets.get(self.node.domain, 0)

    @property
    def opset_name(self) -> str:
        domain = "" if self.node is None or self.node.domain in DEFAULT_DOMAINS else f"{self.node.domain} "
        return f"{domain}opset {self.opset}"

    def attr(self, name: str, default: Any = None) -> Any:
        for a in self.node.attribute:
            if a.name == name:
                value = helper.get_attribute_value(a)
                if isinstance(value, bytes):
                    return value.decode()
                if isinstance(value, onnx.TensorProto):
                    return numpy_helper.to_array(value)
                return value
        return default

    def has_attr(self, name: str) -> bool:
        return any(a.name == name for a in self.node.attribute)

    @property
    def inputs(self) -> list[str]:
        return list(self.node.input)

    @property
    def outputs(self) -> list[str]:
        return list(self.node.output)

    def input(self, i: int) -> str:
        """Name of input `i`, or "" when it is omitted."""
        return self.node.input[i] if i < len(self.node.input) else ""

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"ONNX op '{qualified(self.node.op_type, self.node.domain)}' at node '{self.name}' "
                    f"({self.opset_name}): {message}")

    # ---- emitting IR (layout helpers; `emit` and friends come from EmitContext) --------------------------------
    def to_nhwc(self, x: str) -> str:
        return self.emit1("Transpose", [x], perm=list(NCHW_TO_NHWC))

    def to_nchw(self, x: str, output: str | None = None) -> str:
        return self.emit1("Transpose", [x], output, perm=list(NHWC_TO_NCHW))

    def nhwc_op(self, op: str, x: str, params: list[str], output: str, **attrs: Any) -> str:
        """Emit `op` on the NHWC view of NCHW `x` and transpose the result back to `output` (NCHW); the
        to_nhwc pass later cancels the transposes between neighbouring NHWC ops."""
        y = self.emit1(op, [self.to_nhwc(x), *params], **attrs)
        return self.to_nchw(y, output)


Rule = Callable[[ImportContext], None]
IMPORTERS: dict[str, Rule] = {}


def onnx_op(*op_types: str, domain: str = "") -> Callable[[Rule], Rule]:
    """Register an importer rule for ONNX op types of `domain` (the default domain unless given)."""
    def wrap(rule: Rule) -> Rule:
        for t in op_types:
            key = qualified(t, domain)
            if key in IMPORTERS:
                raise RuntimeError(f"importer for {key} registered twice")
            IMPORTERS[key] = rule
        return rule
    return wrap
