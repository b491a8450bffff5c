"""The MINDIR importer registry: one rule per MindSpore primitive, found by name (`IMPORTERS["Conv2D"]`).

A primitive's arguments arrive two ways: MindSpore 2.3 and later pass most of them as node inputs (Constant
nodes: BatchNorm has 9 inputs, MatMul's transpose flags are inputs), older releases keep them as attributes of the
primitive. A rule reads argument k by `ctx.arg(k, "name", default)`, which takes input k when the node has it and
the attribute `name` otherwise, so one rule reads both styles.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from converter.frontends.emit import EmitContext
from converter.ir import Graph
from lite.status import LiteError, NotSupportedError

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


class ImportContext(EmitContext):
    """What a rule sees: the primitive (`op`, `attrs`), the node's inputs as IR value names or Python constants
    (`args`), and the IR name of its output (`output`; element k of a tuple result is `item(k)`)."""

    def __init__(self, graph: Graph):
        super().__init__(graph)
        self.op = ""
        self.attrs: dict[str, Any] = {}
        self.args: list[Any] = []          # per input: an IR value name, a constant (`Const`) or a tuple of them
        self.output = ""

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"MindSpore primitive '{self.op}' at node '{self.name}': {message}")

    # ---- reading the node -----------------------------------------------------------------------------------
    def input(self, k: int) -> str:
        """Input k as an IR value (a constant input is added as an IR constant); "" when absent or None."""
        if k >= len(self.args):
            return ""
        arg = self.args[k]
        if isinstance(arg, Const):
            if arg.value is None:
                return ""
            self.args[k] = arg = self.add_const(_array(arg.value), "arg")
        return arg

    def operands(self) -> list[str]:
        """Inputs 0 and 1 of a binary op: a Python scalar takes the other operand's dtype (MindSpore's scalar
        arithmetic: `x * 2` of a float x multiplies by 2.0)."""
        scalar = [isinstance(a, Const) and np.ndim(a.value) == 0 and not isinstance(a.value, np.ndarray)
                  for a in self.args[:2]]
        if len(scalar) == 2 and scalar[0] != scalar[1]:
            k = scalar.index(True)
            dtype = self.value(self.input(1 - k)).dtype
            self.args[k] = self.add_const(np.asarray(self.args[k].value, dtype), "scalar")
        return [self.input(0), self.input(1)]

    def tensors(self, k: int) -> list[str]:
        """Input k, a tuple of tensors (Concat's, AddN's), as IR values."""
        arg = self.args[k] if k < len(self.args) else []
        if isinstance(arg, Const):
            return [self.add_const(_array(v), "item") for v in arg.value]
        return [self.add_const(_array(a.value), "item") if isinstance(a, Const) else a for a in arg]

    def arg(self, k: int, name: str, default: Any = None) -> Any:
        """Argument k as a Python value: the constant input k, else the primitive's attribute `name`, else
        `default`. An input computed at run time is refused."""
        if k < len(self.args):
            arg = self.args[k]
            if isinstance(arg, Const):
                return arg.value
            value = self.const(arg)
            if value is None:
                raise self.error(f"argument {k} ('{name}') must be a constant")
            return value.tolist()
        return self.attrs.get(name, default)

    def item(self, k: int) -> str:
        """The IR name of element k of the node's tuple result (what a TupleGetItem of it reads)."""
        return item_name(self.output, k)

    # ---- emitting ---------------------------------------------------------------------------------------------
    def to_nhwc(self, x: str) -> str:
        return self.emit1("Transpose", [x], perm=list(NCHW_TO_NHWC))

    def nhwc_op(self, op: str, x: str, params: list[str], **attrs: Any) -> None:
        """Emit `op` on the NHWC view of NCHW `x`, its result transposed back into the node's output (the
        to_nhwc pass cancels the transposes between neighbouring NHWC ops)."""
        y = self.emit1(op, [self.to_nhwc(x), *params], **attrs)
        self.emit("Transpose", [y], [self.output], perm=list(NHWC_TO_NCHW))


class Const:
    """A Constant node's value as a node input, before a rule decides whether it is an argument or a tensor."""
    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


def item_name(value: str, k: int) -> str:
    return f"{value}[{k}]"


def _array(value: Any) -> np.ndarray:
    """A constant input as a tensor: Python floats are float32 and ints int64, as MindSpore's scalars."""
    array = np.asarray(value)
    if array.dtype == np.float64 and not isinstance(value, np.ndarray):
        return array.astype(np.float32)
    return array


Rule = Callable[[ImportContext], None]
IMPORTERS: dict[str, Rule] = {}


def mindir_op(*primitives: str) -> Callable[[Rule], Rule]:
    """Register an importer rule for MindSpore primitives (by `PrimitiveProto.op_type`)."""
    def wrap(rule: Rule) -> Rule:
        for p in primitives:
            if p in IMPORTERS:
                raise RuntimeError(f"importer for {p} registered twice")
            IMPORTERS[p] = rule
        return rule
    return wrap
