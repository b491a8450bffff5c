"""The TFLite importer registry: one rule per builtin operator, found by name (`IMPORTERS["CONV_2D"]`).

A rule declares how it treats quantized tensors (`quant`):
- "float" (default): the importer hands it float tensors: quantized inputs are dequantized before it (constants at
  once, activations by a `QuantDTypeCast`), and quantized outputs quantized after it. Such ops run in float
  between int8 neighbours and land within one quantum of TFLite's integer kernels.
- "same": data movement (reshape, slice, gather, select, top-k, ...): values pass unchanged, so int8 tensors stay
  int8 when every quantized input and output has the same scale and zero point (TFLite's rule for these ops) and
  the other outputs are integer indices; otherwise "float".
- "int8": the rule maps int8 tensors onto our int8 kernels itself (convolutions, FC, Add, Mul, pooling, ...).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from converter.frontends.emit import EmitContext
from converter.frontends.tflite.reader import OperatorRecord
from converter.ir import Graph, Value
from lite.status import LiteError, NotSupportedError
from schema import fb

A = fb.ActivationType
FUSED = {0: A.NO_ACTIVATION, 1: A.RELU, 3: A.RELU6}   # TFLite ActivationFunctionType -> ours
RELU_N1_TO_1 = 2
FUSED_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
SAME_UPPER, VALID = fb.PadMode.SAME_UPPER, fb.PadMode.VALID
PADDING = {0: SAME_UPPER, 1: VALID}           # TFLite SAME puts the odd pixel at the end, as SAME_UPPER


class ImportContext(EmitContext):
    """What a TFLite importer rule sees: the operator, its input/output value names ("" for omitted inputs)
    and its options by their schema names (`ctx.opt("StrideW")`)."""

    def __init__(self, graph: Graph):
        super().__init__(graph)
        self.op: OperatorRecord | None = None
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self.pass_quant: list[Any] = []          # "same" rules: the params every fresh value inherits
        # the subgraph an option names (WHILE, IF), imported with inputs shaped as the values given (the importer's)
        self.body: Callable[[str, list[Value]], Graph] | None = None
        self.subgraphs = 1                       # how many the file has (subgraph 0 is the main graph)
        # each tensor's shape as the file records it (-1: known at run time), where it holds for the inputs given
        self.recorded: dict[str, tuple[int, ...]] = {}

    def input(self, i: int) -> str:
        return self.inputs[i] if i < len(self.inputs) else ""

    def opt(self, name: str, default: Any = None) -> Any:
        return self.op.options.get(name, default)

    def error(self, message: str, kind: type[LiteError] = NotSupportedError) -> LiteError:
        return kind(f"TFLite op '{self.op.op}' at node '{self.name}' (operator {self.op.index}): {message}")

    def emit(self, op: str, inputs: list[str], outputs: list[str] | int = 1, **attrs: Any) -> list[str]:
        if isinstance(outputs, int) and self.pass_quant and op != "Shape":      # Shape reads only dims
            outputs = [self.quantized_value(self.graph.fresh(f"{self.name}:{op}:{k}"), self.value(inputs[0]).dtype,
                                            self.pass_quant) for k in range(outputs)]
        return super().emit(op, inputs, outputs, **attrs)

    def quantized_value(self, name: str, dtype: np.dtype, params: list[Any], axis: int = 0) -> str:
        self.graph.values[name] = Value(name, (), np.dtype(dtype), quant_params=list(params), quant_axis=axis)
        return name

    def typed(self, hint: str, dtype: Any, rank: int) -> str:
        """A fresh value for an output whose shape is known only at run time (NonZero, Unique): shape inference
        keeps the dtype and rank it is given for such values."""
        name = self.graph.fresh(f"{self.name}:{hint}")
        self.graph.source_types[name] = (np.dtype(dtype), rank)
        return name

    def like(self, x: str) -> str | None:
        """A fresh output name quantized like `x` when `x` is quantized (for a reshape inside an int8 rule),
        else None (emit then makes a plain one)."""
        value = self.value(x)
        if not value.quant_params:
            return None
        return self.quantized_value(self.graph.fresh(f"{self.name}:{x}"), value.dtype, value.quant_params)

    def quantized(self, name: str) -> bool:
        return bool(name) and bool(self.value(name).quant_params)

    # ---- options shared by many builtins --------------------------------------------------------------------------
    def activation(self) -> int:
        """The fused activation as our fused type; RELU_N1_TO_1 is not one (see `emit_fused`)."""
        fused = int(self.opt("FusedActivationFunction", 0))
        if fused not in FUSED:
            raise self.error(f"fused activation {FUSED_NAMES.get(fused, fused)} is not supported")
        return FUSED[fused]

    def emit_fused(self, op: str, inputs: list[str], **attrs: Any) -> None:
        """Emit `op` writing output 0 with the operator's fused activation: NONE / RELU / RELU6 as our fused
        attribute (`fused=False`: ops without one), RELU_N1_TO_1 as a HARD_TANH after it (in the output's
        quantization, as TFLite clamps). TANH and SIGN_BIT are refused: TFLite's kernels do not apply them."""
        fused, fusable = int(self.opt("FusedActivationFunction", 0)), attrs.pop("fused", True)
        if fused == RELU_N1_TO_1 or (fused and not fusable):
            out = self.value(self.outputs[0])
            y = self.emit1(op, inputs, self.quantized_value(self.graph.fresh(f"{self.name}:pre"), out.dtype,
                                                            out.quant_params) if out.quant_params else None, **attrs)
            bounds = {"min_val": -1.0, "max_val": 1.0} if fused == RELU_N1_TO_1 else {}
            self.emit("Activation", [y], self.outputs[:1], type=A.HARD_TANH if bounds else self.activation(), **bounds)
            return
        self.emit(op, inputs, self.outputs[:1], **attrs, **({"activation": self.activation()} if fusable else {}))

    def padding(self) -> int:
        return PADDING[int(self.opt("Padding", 0))]

    def int_list(self, name: str, what: str) -> list[int]:
        """A constant integer input (shape, axes, begin, ...) as a list of int64 values."""
        limits = np.iinfo(np.int64)
        try:
            values = [int(v) for v in np.ravel(self.require_const(name, what))]
        except (ValueError, OverflowError):          # NaN, infinity
            values = None
        if values is None or any(not limits.min <= v <= limits.max for v in values):
            raise self.error(f"{what} '{name}' holds values that are not 64-bit integers")
        return values


def dequantized(value: Value) -> np.ndarray:
    """real = scale * (q - zero_point) of a quantized constant, per tensor or along its quant_axis."""
    scale = np.array([p.scale for p in value.quant_params], np.float64)
    zero_point = np.array([p.zeroPoint for p in value.quant_params], np.float64)
    if scale.size > 1:
        shape = [-1 if i == value.quant_axis else 1 for i in range(value.const.ndim)]
        scale, zero_point = scale.reshape(shape), zero_point.reshape(shape)
    return ((value.const.astype(np.float64) - zero_point) * scale).astype(np.float32)


Rule = Callable[[ImportContext], None]
IMPORTERS: dict[str, Rule] = {}
QUANT: dict[str, str] = {}


def tflite_op(*names: str, quant: str = "float") -> Callable[[Rule], Rule]:
    """Register an importer rule for TFLite builtin operators."""
    if quant not in ("float", "same", "int8"):
        raise ValueError(f"quant mode {quant!r}")

    def wrap(rule: Rule) -> Rule:
        for n in names:
            if n in IMPORTERS:
                raise RuntimeError(f"importer for {n} registered twice")
            IMPORTERS[n], QUANT[n] = rule, quant
        return rule
    return wrap
