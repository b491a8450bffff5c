"""Walk the main subgraph of a TFLite model (subgraph 0, or the one a signature runs) in order and apply one
importer rule per operator; the subgraphs that WHILE and IF name are imported the same way, as bodies, when their
rules ask (`ImportContext.body`).

TFLite is NHWC already, so layout-bound ops are emitted directly on its tensors (no transposes), and graph
inputs and outputs keep TFLite's layout. Tensor names come from the file (made unique); graph inputs and outputs
take the names their signature def gives them when there is one. Resource variables become variable tensors
(`variables.py`): READ_VARIABLE's readers read the tensor, ASSIGN_VARIABLE writes it with an Assign node.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Collection

import numpy as np

from converter.frontends.tflite import rules  # noqa: F401  (registers every importer rule)
from converter.frontends.tflite.reader import (GraphRecord, ModelRecord, OperatorRecord, Quantization, TensorRecord,
                                              read_model)
from converter.frontends.tflite.registry import IMPORTERS, QUANT, ImportContext, dequantized
from converter.frontends.tflite.variables import RESOURCE_OPS, Key, check_operands, handle_key, initial_values
from converter.ir import Graph, Value
from lite.dtypes import DataType, from_numpy
from lite.status import GraphFileError, InputTensorError, LiteError, NotSupportedError
from schema import fb

QUANTIZED_TYPES = (np.dtype(np.int8), np.dtype(np.uint8), np.dtype(np.int16), np.dtype(np.int32))
# Builtins that need what this runtime does not have yet; refused with the reason.
REFUSED = {
    **dict.fromkeys(("LSTM", "RNN", "SVDF"), "this one-step recurrent op keeps its state in variable tensors from "
                    "one invocation to the next, and state kept across invocations is not supported (the sequence "
                    "LSTMs, UNIDIRECTIONAL_/BIDIRECTIONAL_SEQUENCE_LSTM, are)"),
    "BIDIRECTIONAL_SEQUENCE_RNN": "the bidirectional basic RNN has no importer rule (UNIDIRECTIONAL_SEQUENCE_RNN "
                                  "and both sequence LSTMs have one)",
    "CALL": "CALL, the legacy call of a subgraph, is not supported (LiteRT has no kernel for it either)",
    **dict.fromkeys(("HASHTABLE", "HASHTABLE_FIND", "HASHTABLE_IMPORT", "HASHTABLE_LOOKUP", "HASHTABLE_SIZE",
                     "LSH_PROJECTION", "SKIP_GRAM"), "string and hash-table ops are not supported (no string tensors)"),
    **dict.fromkeys(("CONCAT_EMBEDDINGS", "EMBEDDING_LOOKUP_SPARSE"),
                    "legacy sparse-embedding ops are not supported (no sparse tensors)"),
    **dict.fromkeys(("COMPLEX_ABS", "REAL", "IMAG", "RFFT2D"), "complex tensors are not supported"),
    **dict.fromkeys(("CONV_3D", "CONV_3D_TRANSPOSE"), "3-D convolutions have no kernel (Conv2D is 2-D)"),
    **dict.fromkeys(("RANDOM_STANDARD_NORMAL", "RANDOM_UNIFORM", "MULTINOMIAL"),
                    "random draws are not imported (TFLite's Philox streams cannot be reproduced)"),
    **dict.fromkeys(("DILATE", "REDUCE_WINDOW"), "StableHLO-derived ops are not supported"),
    "DELEGATE": "a delegate's fused node runs only inside that delegate",
    "PLACEHOLDER_FOR_GREATER_OP_CODES": "a placeholder code, not an operator",
}
STABLEHLO = "STABLEHLO_"        # the StableHLO op set (a separate dialect): refused as a family


def refusal(op: str) -> str:
    """Why `op` cannot be imported."""
    if op in REFUSED:
        return REFUSED[op]
    if op.startswith("CUSTOM:") or op == "CUSTOM":
        known = ", ".join(name.partition(":")[2] for name in supported_ops() if name.startswith("CUSTOM:"))
        return f"no importer rule for this custom op (custom ops with one: {known})"
    if op.startswith(STABLEHLO):
        return "StableHLO ops are not supported (convert the model with TFLite builtins)"
    return "no importer rule for this builtin"


def supported_ops() -> list[str]:
    return sorted(IMPORTERS)


def quant_params(q: Quantization, bits: int) -> list[Any]:
    params = []
    for scale, zero_point in zip(q.scale, q.zero_point):
        p = fb.QuantParamT()
        p.scale, p.zeroPoint, p.numBits, p.narrowRange, p.inited = float(scale), int(zero_point), bits, False, True
        params.append(p)
    return params


def _value(t: TensorRecord, name: str, keep_uint8: bool = False) -> Value:
    """The IR value of a TFLite tensor: quantized integer tensors carry their params. A quantized uint8 tensor
    becomes int8 with values and zero point shifted by -128 (the same reals, so the same integer arithmetic on
    our int8 kernels) unless `keep_uint8` (graph inputs and outputs keep TFLite's type)."""
    shifted = _uint8_io(t) and not keep_uint8
    data = None if t.data is None else (t.data.astype(np.int16) - 128).astype(np.int8) if shifted else t.data
    value = Value(name, t.shape, _ir_dtype(t) if not keep_uint8 else t.dtype, data)
    if t.quant is not None and t.dtype in QUANTIZED_TYPES:
        q = Quantization(t.quant.scale, t.quant.zero_point - 128, t.quant.axis) if shifted else t.quant
        value.quant_params = quant_params(q, t.dtype.itemsize * 8)
        value.quant_axis = q.axis if q.scale.size > 1 else 0
    return value


def _within(shape: tuple[int, ...], recorded: tuple[int, ...]) -> bool:
    """Whether an input `shape` is one the file's shapes were recorded for: it sets only their unknown (-1) dims."""
    return len(shape) == len(recorded) and all(r in (-1, d) for d, r in zip(shape, recorded))


def _uint8_io(t: TensorRecord) -> bool:
    return t.dtype == np.uint8 and t.quant is not None


def _ir_dtype(t: TensorRecord) -> np.dtype:
    """The dtype of a tensor inside the graph: quantized uint8 becomes int8 (see `_value`)."""
    return np.dtype(np.int8) if _uint8_io(t) else t.dtype


def unique_names(graph: GraphRecord, signature: dict[int, str]) -> list[str]:
    """The IR name of every tensor of `graph` by index: its signature name or its own, made unique."""
    names, seen = [], set()
    for t in graph.tensors:
        name = signature.get(t.index, t.name)
        while name in seen:
            name = f"{name}_{t.index}"
        seen.add(name)
        names.append(name)
    return names


class _Importer:
    """Imports one subgraph of `file` (`stack`: the subgraph indices being imported, this one last); the
    tensors named in `as_inputs` become float32 graph inputs, and the operators computing them are skipped."""

    def __init__(self, file: ModelRecord, input_shapes: dict[str, list[int]], stack: tuple[int, ...] = (0,),
                 as_inputs: Collection[str] = (), signature: dict[int, str] | None = None):
        self.file, self.stack, self.as_inputs = file, stack, set(as_inputs)
        self.model = model = file.graphs[stack[-1]]
        self.names = unique_names(model, signature if signature is not None else file.names if stack == (0,) else {})
        self.graph = Graph("graph" if len(stack) == 1 else model.name or f"subgraph_{stack[-1]}")
        self.ctx = ImportContext(self.graph)
        self.ctx.body, self.ctx.subgraphs = self.body, file.subgraphs
        self.floats: dict[str, str] = {}        # quantized tensor -> its dequantized float copy
        self.initial = initial_values(file, model)    # variable -> its initial value (None: not a constant)
        self.handles: dict[int, Key] = {}       # RESOURCE tensor index -> the variable its VAR_HANDLE names
        self.variables: dict[Key, str] = {}     # variable -> its value's name
        self.assigned: dict[str, int] = {}      # variable value -> how many ASSIGN_VARIABLEs wrote it so far
        self.reads: dict[int, tuple[str, int]] = {}   # READ_VARIABLE output -> (variable, assignments then)
        self.graph.source_types = {self.names[t.index]: (_ir_dtype(t), len(t.shape)) for t in model.tensors}
        for t in model.tensors:
            if t.data is not None and self.names[t.index] not in self.as_inputs:
                self.graph.values[self.names[t.index]] = _value(t, self.names[t.index])
        for i in model.inputs:
            if model.tensors[i].opaque:
                raise NotSupportedError(f"TFLite graph input '{self.names[i]}' has type {model.tensors[i].type_name}, "
                                        f"which this runtime holds no tensor of")
            name, value = self.names[i], _value(model.tensors[i], self.names[i], keep_uint8=True)
            value.const = None                  # (a 0-element input reads as an empty constant)
            if name in input_shapes:
                value.shape = tuple(int(d) for d in input_shapes.pop(name))
            self.graph.values[name] = value
            self.graph.inputs.append(name)
        if input_shapes:
            raise InputTensorError(f"--inputShape names {sorted(input_shapes)}, which are not graph inputs "
                                   f"(inputs: {self.graph.inputs})")
        for t in model.tensors:
            if self.names[t.index] in self.as_inputs:
                name = self.names[t.index]
                self.graph.values[name] = Value(name, t.shape, np.dtype(np.float32))
                self.graph.inputs.append(name)
        if len(stack) == 1 and all(_within(self.graph.values[self.names[i]].shape, model.tensors[i].shape)
                                   for i in model.inputs):
            self.ctx.recorded = {self.names[t.index]: t.shape for t in model.tensors}
        for i in model.inputs:
            if _uint8_io(model.tensors[i]):
                self.ctx.name = self.names[i]
                self.names[i] = self.requantized(self.names[i], _value(model.tensors[i], self.names[i] + ":int8"))

    def name_of(self, index: int) -> str:
        return self.names[index] if index >= 0 else ""

    def run(self) -> Graph:
        for op in self.model.operators:
            if op.outputs and self.as_inputs.issuperset(self.name_of(i) for i in op.outputs):
                continue
            self.ctx.op, self.ctx.name = op, self.name_of(op.outputs[0]) if op.outputs else f"{op.op}_{op.index}"
            self.check_reads(op)
            if op.op in RESOURCE_OPS:
                self.resource_op(op)
            else:
                self.import_op(op)
        self.graph.outputs = [self.names[i] for i in self.model.outputs]
        missing = [o for o in self.graph.outputs if o not in self.graph.values]
        if missing:
            raise NotSupportedError(f"TFLite graph output '{missing[0]}' is produced by no operator")
        self.graph.prune()
        return self.graph

    def resource_op(self, op: OperatorRecord) -> None:
        """VAR_HANDLE names a variable; READ_VARIABLE's readers read its tensor; ASSIGN_VARIABLE is an Assign."""
        if len(self.stack) > 1:
            raise self.ctx.error("resource variables inside a WHILE or IF body are not supported")
        check_operands(op)
        if op.op == "VAR_HANDLE":
            self.handles[op.outputs[0]] = handle_key(op)
        elif op.op == "READ_VARIABLE":
            self.names[op.outputs[0]] = variable = self.variable(op.inputs[0], op.outputs[0], reading=True)
            self.reads[op.outputs[0]] = variable, self.assigned.get(variable, 0)
        else:
            variable, value = self.variable(op.inputs[0], op.inputs[1], reading=False), self.name_of(op.inputs[1])
            if value not in self.graph.values:
                raise self.ctx.error(f"assigns '{value}', which is not produced before it")
            self.ctx.emit("Assign", [variable, value], [])
            self.assigned[variable] = self.assigned.get(variable, 0) + 1

    def check_reads(self, op: OperatorRecord) -> None:
        """Readers read a variable's tensor when they run: one reading a value read before an assignment that
        has run since would see the new value, not the value READ_VARIABLE took."""
        for i in op.inputs:
            if i in self.reads and self.assigned.get(self.reads[i][0], 0) != self.reads[i][1]:
                raise self.ctx.error(f"reads variable '{self.reads[i][0]}' as it was before an ASSIGN_VARIABLE "
                                     f"that comes earlier: a copy of a variable's old value is not supported")

    def variable(self, handle: int, like: int, reading: bool) -> str:
        """The tensor of the variable that `handle` names, made on first use with the type and shape of tensor
        `like` (the value read or assigned) and the initial value its CALL_ONCE assigns."""
        if handle not in self.handles:
            raise self.ctx.error(f"resource '{self.names[handle]}' comes from no VAR_HANDLE before it")
        key, record = self.handles[handle], self.model.tensors[like]
        if key not in self.variables:
            initial = self.initial.get(key)
            if key in self.initial and initial is None:
                raise self.ctx.error(f"variable '{key[1]}' starts as a value its CALL_ONCE init subgraph computes; "
                                     f"only constant initial values are supported")
            if initial is None and reading:
                raise self.ctx.error(f"variable '{key[1]}' is read before anything assigns it (no CALL_ONCE "
                                     f"initialises it)")
            if initial is not None and (initial.shape != record.shape or initial.dtype != record.dtype):
                raise self.ctx.error(f"variable '{key[1]}' starts as {initial.dtype} {list(initial.shape)} but is "
                                     f"used as {record.dtype} {list(record.shape)}")
            name = self.graph.fresh(key[1] or "variable")
            data = initial.data if initial is not None else np.zeros(record.shape, record.dtype)
            self.graph.values[name] = value = _value(replace(record, data=data), name)
            value.variable = True
            self.variables[key] = name
        value = self.graph.values[self.variables[key]]
        if value.shape != record.shape or value.dtype != _ir_dtype(record):
            raise self.ctx.error(f"variable '{key[1]}' is {value.dtype} {list(value.shape)}, used as "
                                 f"{_ir_dtype(record)} {list(record.shape)}")
        return self.variables[key]

    def body(self, option: str, inputs: list[Value]) -> Graph:
        """The subgraph that the operator's option `option` names, imported with inputs shaped as `inputs`
        (TFLite sizes a body's inputs from the values passed in, whatever the file declares)."""
        ctx, index = self.ctx, int(self.ctx.opt(option, -1))
        if not 0 < index < self.file.subgraphs:
            raise ctx.error(f"{option} {index} is not a body subgraph (the file has {self.file.subgraphs} "
                            f"subgraphs; subgraph 0 is the main graph)", GraphFileError)
        if index in self.stack:
            raise ctx.error(f"{option} {index} runs itself (a cycle of subgraphs)", GraphFileError)
        record = self.file.graphs[index]
        if len(record.inputs) != len(inputs):
            raise ctx.error(f"{option} {index} has {len(record.inputs)} inputs, {len(inputs)} expected",
                            GraphFileError)
        if any(record.tensors[i].quant is not None for i in (*record.inputs, *record.outputs)):
            raise ctx.error(f"{option} {index} passes quantized values: control flow runs on float and integer "
                            f"values only")
        names = unique_names(record, {})
        for i, v in zip(record.inputs, inputs):
            if _ir_dtype(record.tensors[i]) != v.dtype:
                raise ctx.error(f"{option} {index} input '{names[i]}' is {_ir_dtype(record.tensors[i])}, the "
                                f"value passed in is {v.dtype}", GraphFileError)
        return _Importer(self.file, {names[i]: list(v.shape) for i, v in zip(record.inputs, inputs)},
                         (*self.stack, index)).run()

    def import_op(self, op: OperatorRecord) -> None:
        ctx = self.ctx
        if op.op not in IMPORTERS:
            raise NotSupportedError(f"Unsupported TFLite op '{op.op}' at node '{ctx.name}' (operator {op.index}): "
                                    f"{refusal(op.op)}")
        tensors = self.model.tensors
        opaque = next((tensors[i] for i in (*op.inputs, *op.outputs) if i >= 0 and tensors[i].opaque), None)
        if opaque is not None:
            raise ctx.error(f"tensor '{self.names[opaque.index]}' has type {opaque.type_name}, which this runtime "
                            f"holds no tensor of")
        # a variable tensor that no op writes before holds its reset value, zeros: rules see an omitted input
        inputs = ["" if i >= 0 and self.model.tensors[i].variable and self.names[i] not in self.graph.values
                  else self.name_of(i) for i in op.inputs]
        missing = [n for n in inputs if n and n not in self.graph.values]
        if missing:
            raise NotSupportedError(f"TFLite op '{op.op}' at node '{ctx.name}' reads '{missing[0]}', which is not "
                                    f"produced before it")
        outputs = [self.name_of(i) for i in op.outputs]
        uint8_outputs = [(k, name) for k, (i, name) in enumerate(zip(op.outputs, outputs))
                         if i in self.model.outputs and _uint8_io(self.model.tensors[i])]
        for k, name in uint8_outputs:
            outputs[k] = self.graph.fresh(f"{name}:int8")
        for i, name in zip(op.outputs, outputs):
            self.graph.values[name] = _value(self.model.tensors[i], name)
            self.graph.values[name].const = None
        mode = QUANT[op.op]
        quantized = [n for n in (*inputs, *outputs) if n and self.graph.values[n].quant_params]
        runtime = [n for n in inputs if n and self.graph.const(n) is None]
        data = next((n for n in runtime if self.graph.values[n].quant_params), runtime[0] if runtime else
                    inputs[0] if inputs else "")
        if mode == "same" and quantized and not self.same_params(data, quantized, outputs):
            mode = "float"
        if mode == "int8" and quantized and all(self.graph.const(n) is not None for n in quantized):
            mode = "float"          # only weights are quantized (a hybrid model): float math on dequantized weights
        ctx.pass_quant = self.graph.values[data].quant_params if mode == "same" and quantized else []
        try:
            if mode == "float" and quantized:
                self.run_in_float(op, inputs, outputs)
            else:
                ctx.inputs, ctx.outputs = inputs, outputs
                IMPORTERS[op.op](ctx)
        except LiteError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ctx.error(f"cannot import: {e}") from e
        finally:
            ctx.pass_quant = []
        for k, name in uint8_outputs:
            self.requantized(outputs[k], _value(self.model.tensors[op.outputs[k]], name, keep_uint8=True))

    def requantized(self, source: str, target: Value) -> str:
        """`source` cast into `target` (uint8 <-> int8 with the same reals: exact through float32, as |q - zp|
        <= 255 keeps (q - zp) * s / s within rounding of the integer); returns the target's name."""
        self.graph.values[target.name] = target
        real = self.ctx.emit1("QuantDTypeCast", [source], src_t=from_numpy(self.graph.values[source].dtype),
                              dst_t=DataType.FLOAT32)
        self.ctx.emit("QuantDTypeCast", [real], [target.name], src_t=DataType.FLOAT32, dst_t=from_numpy(target.dtype))
        return target.name

    def same_params(self, x: str, quantized: list[str], outputs: list[str]) -> bool:
        """Whether values can pass unchanged: every quantized tensor has x's one (scale, zero point), and the
        outputs that are not quantized are integer (indices: TopK, ArgMax), not reals."""
        a = self.graph.values[x].quant_params
        key = (a[0].scale, a[0].zeroPoint) if len(a) == 1 else None
        return key is not None and all(
            len(b) == 1 and (b[0].scale, b[0].zeroPoint) == key for b in (self.graph.values[n].quant_params
                                                                          for n in quantized)) and all(
            self.graph.values[o].quant_params or self.graph.values[o].dtype.kind in "iub" for o in outputs)

    def float_input(self, name: str) -> str:
        """A float copy of a quantized tensor: constants dequantized at once, activations by a QuantDTypeCast."""
        value = self.graph.values[name]
        if not value.quant_params or value.dtype == np.int32 and self.graph.const(name) is None:
            return name
        if name not in self.floats:
            if self.graph.const(name) is not None:
                self.floats[name] = self.ctx.add_const(dequantized(value), "dequantized")
            else:
                self.floats[name] = self.ctx.emit1("QuantDTypeCast", [name], src_t=from_numpy(value.dtype),
                                                   dst_t=DataType.FLOAT32)
        return self.floats[name]

    def run_in_float(self, op: OperatorRecord, inputs: list[str], outputs: list[str]) -> None:
        """The rule on dequantized inputs, its quantized outputs quantized back with their own params."""
        ctx = self.ctx
        ctx.inputs = [self.float_input(n) if n else "" for n in inputs]
        ctx.outputs = [self.graph.fresh(f"{o}:float") if self.graph.values[o].quant_params else o for o in outputs]
        IMPORTERS[op.op](ctx)
        for name, produced in zip(outputs, ctx.outputs):
            if produced != name:
                ctx.emit("QuantDTypeCast", [produced], [name], src_t=DataType.FLOAT32,
                         dst_t=from_numpy(self.graph.values[name].dtype))


def import_model(data: bytes, input_shapes: dict[str, list[int]] | None = None, source: str = "<buffer>") -> Graph:
    """Build the IR of the `.tflite` model in `data`. `input_shapes` overrides graph input dims by input name."""
    return import_file(read_model(data, source), input_shapes)


def import_file(file: ModelRecord, input_shapes: dict[str, list[int]] | None = None,
                weights_as_inputs: Collection[str] = (), signature: str | None = None) -> Graph:
    """Build the IR of the records of a `.tflite` file, the float weights `weights_as_inputs` (named as
    `TFLiteSource.float_weights` names them) as graph inputs. `signature` picks the entry point by its key (the
    subgraph it runs becomes the graph, named by the key, its inputs and outputs named as the signature names
    them: `lite.inspect` shows which entry point a converted file holds); by default subgraph 0."""
    if signature is None:
        return _Importer(file, dict(input_shapes or {}), as_inputs=weights_as_inputs).run()
    entry = file.signature(signature)
    graph = _Importer(file, dict(input_shapes or {}), (entry.subgraph,), weights_as_inputs, entry.names).run()
    graph.name = entry.key
    return graph
