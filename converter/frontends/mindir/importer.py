"""Walk the main graph of a MINDIR model in order and apply one importer rule per primitive node.

MindSpore's graphs carry plumbing that orders side effects and builds tuples: `Load` (read a parameter),
`UpdateState` and the monad tokens, `Depend`, `MakeTuple`, `TupleGetItem`. None of it computes anything in an
inference or training graph of ours, so the walk resolves it away: every node output maps to an IR value name, a
constant, a tuple of those, or a token (`Env`). IR names drop the "<graph name>:" prefix MindSpore gives every
name, so weights keep the names of the network's parameters (`conv1.weight`) and inputs their argument names.
"""
from __future__ import annotations

from typing import Any, Collection, Iterator, Union

import numpy as np

from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.mindir import rules  # noqa: F401  (registers every importer rule)
from converter.frontends.mindir.reader import MONAD, attribute_value, dtype_of, tensor_array
from converter.frontends.mindir.registry import IMPORTERS, Const, ImportContext, item_name
from converter.ir import Graph, Value
from lite.status import GraphFileError, InputTensorError, LiteError, NotSupportedError

Entry = Union[str, Const, list, object]     # an IR value name, a constant, a tuple of entries, or MONAD
ALIASES = ("Load", "Depend", "StopGradient")  # output = input 0 (the other inputs only order side effects)
PLUMBING = (*ALIASES, "UpdateState", "MakeTuple", "TupleGetItem")
REF = "REF::"


def supported_ops() -> list[str]:
    return sorted(IMPORTERS)


class Model:
    """A parsed MINDIR model with its primitives by name and its parameters decoded (`source`: the file, for
    messages and external data)."""

    def __init__(self, proto: pb.ModelProto, source: str):
        self.proto, self.source = proto, source
        self.graph = proto.graph
        self.prefix = f"{self.graph.name}:"
        self.primitives = {p.name: p for p in proto.primitives}
        self.parameters = {self.short(p.name): tensor_array(p, source) for p in self.graph.parameter}

    def short(self, name: str) -> str:
        return name[len(self.prefix):] if name.startswith(self.prefix) else name

    def primitive(self, node: pb.NodeProto) -> str:
        """The primitive a node applies ("Constant" for a value node); a call of another graph (control flow) is
        refused."""
        if node.op_type == "Constant":
            return "Constant"
        if not node.op_type.startswith(REF):
            raise NotSupportedError(f"'{self.source}': node '{self.short(node.name)}' calls graph "
                                    f"'{node.op_type}': control flow (graph calls) is not supported")
        prim = self.primitives.get(node.op_type[len(REF):])
        if prim is None:
            raise GraphFileError(f"'{self.source}': node '{self.short(node.name)}' names primitive "
                                 f"'{node.op_type[len(REF):]}', which the file does not define")
        return prim.op_type

    def walk(self, env: dict[str, Entry]) -> Iterator[tuple[pb.NodeProto, str, list[Entry]]]:
        """The compute nodes in order with their primitive and resolved inputs; Constant nodes and plumbing are
        resolved into `env` (keyed by the file's names) on the way. The caller stores each compute node's result."""
        for node in self.graph.node:
            op = self.primitive(node)
            out = node.output[0] if node.output else node.name
            if op == "Constant":
                values = [a for a in node.attribute if a.name == "value"]
                if not values:
                    raise GraphFileError(f"'{self.source}': Constant node '{node.name}' has no value")
                value = attribute_value(values[0], self.source)
                env[out] = value if value is MONAD else Const(value)
                continue
            inputs = [self.resolve(env, i, node) for i in node.input]
            if op in PLUMBING:
                env[out] = self.plumbing(op, inputs, node)
                continue
            env[out] = self.short(out)         # the rule writes this IR value (a tuple: its items)
            yield node, op, [i for i in inputs if i is not MONAD]

    def resolve(self, env: dict[str, Entry], name: str, node: pb.NodeProto) -> Entry:
        if name not in env:
            raise GraphFileError(f"'{self.source}': node '{self.short(node.name)}' reads '{self.short(name)}', "
                                 f"which is not produced before it")
        return env[name]

    def plumbing(self, op: str, inputs: list[Entry], node: pb.NodeProto) -> Entry:
        if op in ALIASES:
            return inputs[0]
        if op == "UpdateState":
            return MONAD
        if op == "MakeTuple":
            return inputs
        whole, index = inputs
        if not isinstance(index, Const):
            raise GraphFileError(f"'{self.source}': TupleGetItem node '{self.short(node.name)}' has no constant "
                                 f"index")
        k = int(index.value)
        if isinstance(whole, list):
            return whole[k]
        if isinstance(whole, Const):
            return Const(whole.value[k])
        return item_name(whole, k)

    def initial_env(self) -> dict[str, Entry]:
        """The graph inputs and parameters as IR names, by their names in the file."""
        env: dict[str, Entry] = {p.name: self.short(p.name) for p in self.graph.parameter}
        env.update((i.name, self.short(i.name)) for i in self.graph.input)
        return env

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        """(IR node name, float weights read) of every compute node in order."""
        weights = {k for k, v in self.parameters.items() if v.dtype.kind == "f"}
        return [(self.short(node.name), [i for i in _flat(inputs) if isinstance(i, str) and i in weights])
                for node, _, inputs in self.walk(self.initial_env())]


def _flat(entries: list[Entry]) -> list[Entry]:
    flat = []
    for e in entries:
        flat.extend(_flat(e) if isinstance(e, list) else [e])
    return flat


def _input_value(model: Model, vi: pb.ValueInfoProto, override: list[int] | None) -> Value:
    name = model.short(vi.name)
    if not vi.tensor:
        raise NotSupportedError(f"'{model.source}': graph input '{name}' is not a tensor")
    t = vi.tensor[0]
    dims = override if override is not None else list(t.dims)
    return Value(name, tuple(int(d) for d in dims), dtype_of(t, f"'{model.source}'"))


def import_model(model: Model, input_shapes: dict[str, list[int]] | None = None,
                 weights_as_inputs: Collection[str] = ()) -> Graph:
    """Build the IR of `model`: `input_shapes` overrides graph input dims by input name; the float weights
    named in `weights_as_inputs` become graph inputs instead of constants."""
    input_shapes = dict(input_shapes or {})
    graph = Graph(model.short(model.graph.name) or "graph")
    for vi in model.graph.input:
        name = model.short(vi.name)
        if name in model.parameters:         # older files list the parameters among the inputs too
            continue
        graph.values[name] = _input_value(model, vi, input_shapes.pop(name, None))
        graph.inputs.append(name)
    for name, array in model.parameters.items():
        as_input = name in weights_as_inputs
        graph.values[name] = Value(name, array.shape, array.dtype, None if as_input else array)
        if as_input:
            graph.inputs.append(name)
    if input_shapes:
        raise InputTensorError(f"--inputShape names {sorted(input_shapes)}, which are not graph inputs "
                               f"(inputs: {graph.inputs})")
    env = model.initial_env()
    ctx = ImportContext(graph)
    for node, op, inputs in model.walk(env):
        ctx.name, ctx.op, ctx.output = model.short(node.name), op, model.short(node.output[0])
        rule = IMPORTERS.get(op)
        if rule is None:
            raise NotSupportedError(f"'{model.source}': unsupported MindSpore primitive '{op}' at node "
                                    f"'{ctx.name}'")
        ctx.args = [i if isinstance(i, (str, Const)) else _tuple_arg(i) for i in inputs]
        ctx.attrs = _attributes(model, node)
        try:
            rule(ctx)
        except LiteError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ctx.error(f"cannot import: {e}") from e
    graph.outputs = _outputs(model, env)
    graph.prune()
    return graph


def _tuple_arg(entries: list[Entry]) -> Any:
    """A tuple input: a constant when all its elements are (a shape, axes), else its elements (IR names and
    constants: `ImportContext.tensors`)."""
    if all(isinstance(e, Const) for e in entries):
        return Const([e.value for e in entries])
    return _flat(entries)


def _attributes(model: Model, node: pb.NodeProto) -> dict[str, Any]:
    prim = model.primitives[node.op_type[len(REF):]]
    return {a.name: attribute_value(a, model.source) for a in prim.attribute
            if a.name not in ("input_names", "output_names")}


def _outputs(model: Model, env: dict[str, Entry]) -> list[str]:
    outputs = []
    for vi in model.graph.output:
        for entry in _flat([model.resolve(env, vi.name, vi)]):
            if isinstance(entry, Const):
                raise NotSupportedError(f"'{model.source}': graph output '{model.short(vi.name)}' is a constant")
            if not isinstance(entry, str):
                raise NotSupportedError(f"'{model.source}': graph output '{model.short(vi.name)}' is not a tensor")
            outputs.append(entry)
    return outputs


def float_weights(model: Model) -> dict[str, np.ndarray]:
    return {name: array for name, array in model.parameters.items() if array.dtype.kind == "f"}
