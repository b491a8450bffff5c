"""The ONNX importer registry: one rule per ONNX op type, found by name (`IMPORTERS["Conv"]`)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from converter.ir import Graph, Node, Value
from converter.shape_inference import infer_node
from lite.status import LiteError, NotSupportedError

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


class ImportContext:
    """What an importer rule sees: the ONNX node being imported and helpers to emit IR for it."""

    def __init__(self, graph: Graph, opset: int):
        self.graph = graph
        self.opset = opset
        self.node: onnx.NodeProto | None = None
        self.name = ""

    # ---- reading the ONNX node ---------------------------------------------------------------------------------
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

    def value(self, name: str) -> Value:
        return self.graph.values[name]

    def const(self, name: str) -> np.ndarray | None:
        return self.graph.const(name) if name else None

    def require_const(self, name: str, what: str) -> np.ndarray:
        value = self.const(name)
        if value is None:
            raise self.error(f"{what} must be a constant (or computable from static shapes)")
        return value

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"ONNX op '{self.node.op_type}' at node '{self.name}' (opset {self.opset}): {message}")

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

    def add_const(self, array: np.ndarray, hint: str = "const") -> str:
        return self.graph.add_const(array, f"{self.name}/{hint}")

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


def onnx_op(*op_types: str) -> Callable[[Rule], Rule]:
    """Register an importer rule for ONNX op types (default domain)."""
    def wrap(rule: Rule) -> Rule:
        for t in op_types:
            if t in IMPORTERS:
                raise RuntimeError(f"importer for {t} registered twice")
            IMPORTERS[t] = rule
        return rule
    return wrap
