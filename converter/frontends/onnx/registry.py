"""The ONNX importer registry: one rule per ONNX op type, found by name (`IMPORTERS["Conv"]`)."""
from __future__ import annotations

from typing import Any, Callable

import onnx
from onnx import helper, numpy_helper

from converter.frontends.emit import EmitContext
from converter.ir import Graph
from lite.status import LiteError, NotSupportedError

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


class ImportContext(EmitContext):
    """What an importer rule sees: the ONNX node being imported and helpers to emit IR for it."""

    def __init__(self, graph: Graph, opset: int):
        super().__init__(graph)
        self.opset = opset
        self.node: onnx.NodeProto | None = None

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

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"ONNX op '{self.node.op_type}' at node '{self.name}' (opset {self.opset}): {message}")

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


def onnx_op(*op_types: str) -> Callable[[Rule], Rule]:
    """Register an importer rule for ONNX op types (default domain)."""
    def wrap(rule: Rule) -> Rule:
        for t in op_types:
            if t in IMPORTERS:
                raise RuntimeError(f"importer for {t} registered twice")
            IMPORTERS[t] = rule
        return rule
    return wrap
