"""Walk the main graph of a MINDIR model in order and apply one importer rule per primitive node.

MindSpore's graphs carry plumbing that orders side effects and builds tuples: `Load` (read a parameter),
`UpdateState` and the monad tokens, `Depend`, `MakeTuple`, `TupleGetItem`. None of it computes anything in an
inference or training graph of ours, so the walk resolves it away: every node output maps to an IR value name, a
constant, a tuple of those, or a token (an `Entry`). IR names drop the "<graph name>:" prefix MindSpore gives every
name, so weights keep the names of the network's parameters (`conv1.weight`) and inputs their argument names.

Control flow is graphs of `functions` called by nodes: `Partial(graph, args...)` binds arguments, `Switch(cond,
a, b)` picks one of two, and a node whose op_type names such a value (or a graph) calls it. A call is inlined; a
Switch on a condition known at import inlines its taken branch, otherwise it becomes our If with both branches as
bodies. A loop is a header graph switching to a body that calls the header back: our Loop (see "loops" below);
any other graph calling itself is refused.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Collection, Iterator, Union

import numpy as np

from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.mindir import rules  # noqa: F401  (registers every importer rule)
from converter.frontends.mindir.reader import MONAD, attribute_value, dtype_of, tensor_array
from converter.frontends.mindir.registry import IMPORTERS, Const, ImportContext, item_name
from converter.ir import Graph, Value
from lite.status import GraphFileError, InputTensorError, LiteError, NotSupportedError

Entry = Union[str, Const, list, "Partial", "Switch", object]   # an IR value name, a constant, a tuple of entries,
# a graph with bound arguments, a choice of two, or MONAD
ALIASES = ("Load", "Depend", "StopGradient")  # output = input 0 (the other inputs only order side effects)
TUPLES = ("MakeTuple", "make_list")        # make_list: a Python list of MindSpore 2.0
PLUMBING = (*ALIASES, *TUPLES, "UpdateState", "TupleGetItem", "Partial", "Switch")
REF = "REF::"
CALL = "<call>"           # the "primitive" of a node calling a graph


@dataclass
class Partial:
    """A graph of `functions` with its first arguments bound."""
    graph: pb.GraphProto
    bound: list


@dataclass
class Switch:
    """`then` when `cond` holds, else `other`."""
    cond: Entry
    then: Entry
    other: Entry


def supported_ops() -> list[str]:
    return sorted(IMPORTERS)


class Model:
    """A parsed MINDIR model with its primitives and graphs by name and its parameters decoded (`source`: the
    file, for messages and external data)."""

    def __init__(self, proto: pb.ModelProto, source: str):
        self.proto, self.source = proto, source
        self.graph = proto.graph
        self.functions = {g.name: g for g in proto.functions}
        self.graph_names = {self.graph.name, *self.functions}
        self.primitives = {p.name: p for p in proto.primitives}
        self.constants = {n.output[0]: n for g in (self.graph, *proto.functions) for n in g.node
                          if n.op_type == "Constant" and n.output}
        self.parameters = {self.short(p.name): tensor_array(p, source) for p in self.graph.parameter}

    def short(self, name: str) -> str:
        """`name` without the "<graph name>:" prefix."""
        head, sep, rest = name.partition(":")
        return rest if sep and head in self.graph_names else name

    def primitive(self, node: pb.NodeProto) -> str:
        """The primitive a node applies: "Constant" for a value node, CALL for a call of a graph or of a value."""
        target = self.callee(node)
        if target == "Constant":
            return target
        return self.primitives[target].op_type if target in self.primitives else CALL

    def callee(self, node: pb.NodeProto) -> str:
        """What a node's op_type names: a primitive, a graph, or a value of its graph."""
        return node.op_type[len(REF):] if node.op_type.startswith(REF) else node.op_type

    def walk(self, graph: pb.GraphProto, env: dict[str, Entry]) \
            -> Iterator[tuple[pb.NodeProto, str, list[Entry]]]:
        """The compute nodes and calls of `graph` in order with their primitive and resolved inputs (a call's
        first input: what it calls); Constant nodes and plumbing are resolved into `env` (keyed by the file's
        names) on the way, and a compute node's output is recorded under its short name (which the importer may
        replace by a fresh one)."""
        for node in graph.node:
            op = self.primitive(node)
            out = node.output[0] if node.output else node.name
            if op == "Constant":
                env[out] = self.constant(node)
                continue
            inputs = [self.resolve(env, i, node) for i in node.input]
            if op in PLUMBING:
                try:
                    env[out] = self.plumbing(op, inputs, node)
                except (ValueError, TypeError, IndexError) as e:
                    raise GraphFileError(f"'{self.source}': {op} node '{self.short(node.name)}' cannot be "
                                         f"resolved: {e}") from None
                continue
            if not node.output:                 # the rules and calls name their IR value after the output
                raise GraphFileError(f"'{self.source}': {op} node '{self.short(node.name)}' has no output")
            env[out] = self.short(out)         # the rule writes this IR value (a tuple: its items)
            if op == CALL:                      # a graph's parameters may be tokens: they stay
                yield node, op, [self.resolve(env, self.callee(node), node), *inputs]
                continue
            yield node, op, [i for i in inputs if i is not MONAD]

    def constant(self, node: pb.NodeProto) -> Entry:
        values = [a for a in node.attribute if a.name == "value"]
        if not values:
            raise GraphFileError(f"'{self.source}': Constant node '{node.name}' has no value")
        value = attribute_value(values[0], self.source)
        return value if value is MONAD else Const(value)

    def resolve(self, env: dict[str, Entry], name: str, node: pb.NodeProto) -> Entry:
        """What `name` holds: a value of `env`, a Constant of any graph (graphs share them), or a graph."""
        if name in env:
            return env[name]
        if name in self.constants:
            return self.constant(self.constants[name])
        if name in self.functions:
            return Partial(self.functions[name], [])
        raise GraphFileError(f"'{self.source}': node '{self.short(node.name)}' reads '{self.short(name)}', "
                             f"which is not produced before it")

    def plumbing(self, op: str, inputs: list[Entry], node: pb.NodeProto) -> Entry:
        if op in ALIASES:
            return inputs[0]
        if op == "UpdateState":
            return MONAD
        if op in TUPLES:
            return inputs
        if op == "Partial":
            if not isinstance(inputs[0], Partial):
                raise GraphFileError(f"'{self.source}': Partial node '{self.short(node.name)}' binds no graph")
            return Partial(inputs[0].graph, inputs[0].bound + inputs[1:])
        if op == "Switch":
            return Switch(*inputs)
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
        """(IR node name, float weights read) of every compute node of the main graph in order."""
        weights = {k for k, v in self.parameters.items() if v.dtype.kind == "f"}
        return [(self.short(node.name), [i for i in _flat(inputs) if isinstance(i, str) and i in weights])
                for node, _, inputs in self.walk(self.graph, self.initial_env())]


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
    import_nodes(model, model.graph, env, ImportContext(graph), (model.graph.name,))
    graph.outputs = _outputs(model, env)
    graph.prune()
    return graph


def import_nodes(model: Model, g: pb.GraphProto, env: dict[str, Entry], ctx: ImportContext,
                 stack: tuple[str, ...], until: str = "") -> None:
    """Apply one rule per compute node of `g` (the graphs being imported: `stack`), inlining the graphs it calls;
    stop before the node whose output is `until`. A graph imported twice into one IR graph (a loop's header)
    gets fresh IR names the second time."""
    for node, op, inputs in model.walk(g, env):
        if node.output[0] == until:
            return
        ctx.name, ctx.op, ctx.output = model.short(node.name), op, ctx.graph.fresh(model.short(node.output[0]))
        env[node.output[0]] = ctx.output
        if op == CALL:
            _call(model, env, ctx, node, inputs[0], inputs[1:], stack)
            continue
        rule = IMPORTERS.get(op)
        if rule is None:
            raise NotSupportedError(f"'{model.source}': unsupported MindSpore primitive '{op}' at node "
                                    f"'{ctx.name}'")
        ctx.args = [i if isinstance(i, (str, Const)) else _tuple_arg(i) for i in inputs]
        ctx.attrs = attributes(model, node)
        try:
            rule(ctx)
        except LiteError:
            raise
        except (ValueError, TypeError, KeyError, IndexError) as e:
            raise ctx.error(f"cannot import: {e}") from e


def _call(model: Model, env: dict[str, Entry], ctx: ImportContext, node: pb.NodeProto, callee: Entry,
          args: list[Entry], stack: tuple[str, ...]) -> None:
    """A call node: the callee inlined (a Switch on a constant condition: its taken branch), our If, or, for a
    loop's header, our Loop."""
    if isinstance(callee, Switch):
        cond = callee.cond.value if isinstance(callee.cond, Const) else ctx.const(callee.cond)
        if cond is None:
            _if(model, env, ctx, node, callee, args, stack)
            return
        callee = callee.then if bool(np.ravel(cond)[0]) else callee.other
    g, args = _bind(model, ctx, callee, args, stack)
    if _loop_header(model, g):
        _loop(model, env, ctx, node, g, args, stack)
        return
    env[node.output[0]] = _inline(model, env, ctx, node, g, args, stack)


def _bound(env: dict[str, Entry], g: pb.GraphProto, args: list[Entry]) -> dict[str, Entry]:
    """`env` with the parameters of `g` bound to `args`."""
    inner = dict(env)
    inner.update((param.name, arg) for param, arg in zip(g.input, args))
    return inner


def _inline(model: Model, env: dict[str, Entry], ctx: ImportContext, node: pb.NodeProto, g: pb.GraphProto,
            args: list[Entry], stack: tuple[str, ...]) -> Entry:
    """Import the nodes of `g` called with `args` into the graph being built; what `g` returns."""
    inner = _bound(env, g, args)
    import_nodes(model, g, inner, ctx, (*stack, g.name))
    return model.resolve(inner, g.output[0].name, node)


# ---- loops --------------------------------------------------------------------------------------------------------
# MindSpore writes `while cond(state): state = body(state)` as a header graph H(state) whose last node calls
# Switch(cond, Partial(B, ...), Partial(E, ...)), B ending in a call of H with the next state, E the exit. It
# becomes our Loop carrying H's parameters: the condition of the first iteration is H's computed before the loop;
# the loop body runs H (for B's arguments), B up to its call of H (the next state) and H again (the next
# condition); after the loop, H on the final state gives E's arguments, and E is inlined.
def _calling(model: Model, g: pb.GraphProto, callee: str) -> pb.NodeProto | None:
    """The node of `g` calling `callee` (a graph, or a value of `g`), if any."""
    return next((n for n in g.node if model.primitive(n) == CALL and model.callee(n) == callee), None)


def _switch_call(model: Model, g: pb.GraphProto) -> pb.NodeProto | None:
    """The node of `g` calling the result of one of its Switch nodes, if any."""
    switches = {n.output[0] for n in g.node if n.output and model.primitive(n) == "Switch"}
    return next((n for n in g.node if model.primitive(n) == CALL and model.callee(n) in switches), None)


def _loop_header(model: Model, g: pb.GraphProto) -> bool:
    """Whether `g` calls a Switch one of whose branches calls `g` back."""
    call = _switch_call(model, g)
    if call is None:
        return False
    switch = next(n for n in g.node if n.output[:1] == [model.callee(call)])
    branches = [n.input[0] for n in g.node if n.output[:1] and n.output[0] in switch.input[1:]
                and model.primitive(n) == "Partial" and n.input[0] in model.functions]
    return any(_calling(model, model.functions[b], g.name) is not None for b in branches)


def _header(model: Model, env: dict[str, Entry], ctx: ImportContext, g: pb.GraphProto, state: list[Entry],
            stack: tuple[str, ...]) -> Switch:
    """Import header `g` on `state` up to its call of a Switch: that Switch."""
    inner = _bound(env, g, state)
    call = _switch_call(model, g)
    import_nodes(model, g, inner, ctx, (*stack, g.name), until=call.output[0])
    switch = model.resolve(inner, model.callee(call), call)
    if not isinstance(switch.then, Partial) or not isinstance(switch.other, Partial):
        raise ctx.error(f"loop header '{model.short(g.name)}' does not switch between graphs", GraphFileError)
    return switch


def _tensor(ctx: ImportContext, entry: Entry, what: str) -> str:
    if isinstance(entry, Const):
        return ctx.add_const(np.asarray(entry.value), "const")
    if not isinstance(entry, str):
        raise ctx.error(f"{what} is not a tensor: only loops carrying tensors are supported")
    return entry


def _loop(model: Model, env: dict[str, Entry], ctx: ImportContext, node: pb.NodeProto, g: pb.GraphProto,
          state: list[Entry], stack: tuple[str, ...]) -> None:
    """Our Loop for header `g` called on `state` (ordering tokens in it stay tokens, not carried)."""
    name, output = ctx.name, node.output[0]
    first = _header(model, env, ctx, g, state, stack)
    if not isinstance(first.cond, str):
        raise ctx.error("a loop whose first condition is known at import is not supported")
    tensors = [k for k, s in enumerate(state) if s is not MONAD]
    carried = [_tensor(ctx, state[k], f"loop state {k}") for k in tensors]

    def with_tokens(values: list[str]) -> list[Entry]:
        full: list[Entry] = [MONAD] * len(state)
        for k, v in zip(tensors, values):
            full[k] = v
        return full

    body = Graph(model.short(g.name))
    body.values["iteration"] = Value("iteration", (), np.dtype(np.int64))
    body.values["cond"] = Value("cond", (), np.dtype(np.bool_))
    body.inputs = ["iteration", "cond"]
    for k, c in enumerate(carried):
        outer = ctx.value(c)
        body.values[f"state_{k}"] = Value(f"state_{k}", outer.shape, outer.dtype, format=outer.format)
        body.inputs.append(f"state_{k}")
    inner_ctx = ImportContext(body)
    switch = _header(model, env, inner_ctx, g, with_tokens(body.inputs[2:]), stack)
    b, args = _bind(model, inner_ctx, switch.then, [], (*stack, g.name))
    inner = _bound(env, b, args)
    back = _calling(model, b, g.name)
    if back is None:
        raise ctx.error(f"the loop's body '{model.short(b.name)}' does not call its header back")
    import_nodes(model, b, inner, inner_ctx, (*stack, g.name, b.name), until=back.output[0])
    following = [model.resolve(inner, i, back) for i in back.input]
    if len(following) != len(state):
        raise ctx.error(f"the loop's body passes {len(following)} values back, the header takes {len(state)}",
                        GraphFileError)
    following = [_tensor(inner_ctx, following[k], f"loop state {k}") for k in tensors]
    again = _header(model, env, inner_ctx, g, with_tokens(following), stack)
    body.outputs = [_tensor(inner_ctx, again.cond, "the loop condition"), *following]
    for k, out in enumerate(body.outputs):
        if out in body.inputs:          # a value passed through: an output of its own
            body.outputs[k] = inner_ctx.emit1("Identity", [out])
    for k, out in enumerate(body.outputs[1:]):
        if body.values[out].shape != body.values[f"state_{k}"].shape:
            raise ctx.error(f"loop state {k} changes shape from {list(body.values[f'state_{k}'].shape)} to "
                            f"{list(body.values[out].shape)}: only loops keeping their shapes are supported")
    body.prune()
    ctx.name = name
    final = [Value(ctx.graph.fresh(f"{name}/state_{k}"), ctx.value(c).shape, ctx.value(c).dtype)
             for k, c in enumerate(carried)]
    ctx.emit_control("Loop", ["", first.cond, *carried], final, [body], implicit_inputs=0)
    last = _header(model, env, ctx, g, with_tokens([v.name for v in final]), stack)
    e, args = _bind(model, ctx, last.other, [], (*stack, g.name))
    env[output] = _inline(model, env, ctx, node, e, args, (*stack, g.name))


def _bind(model: Model, ctx: ImportContext, callee: Entry, args: list[Entry],
          stack: tuple[str, ...]) -> tuple[pb.GraphProto, list[Entry]]:
    """The graph a call runs and all its arguments (those bound first); a graph already being imported is a loop."""
    if not isinstance(callee, Partial):
        raise ctx.error("calls a value that is not a graph", GraphFileError)
    g, args = callee.graph, [*callee.bound, *args]
    if g.name in stack:
        raise NotSupportedError(f"'{model.source}': graph '{model.short(g.name)}' calls itself at node "
                                f"'{ctx.name}', not as a loop's header (a Switch whose branch calls it back): such "
                                f"recursion is not supported")
    if len(args) != len(g.input):
        raise ctx.error(f"calls graph '{model.short(g.name)}' with {len(args)} arguments, it has {len(g.input)}",
                        GraphFileError)
    return g, args


def _if(model: Model, env: dict[str, Entry], ctx: ImportContext, node: pb.NodeProto, switch: Switch,
        args: list[Entry], stack: tuple[str, ...]) -> None:
    """Both branches imported as bodies of our If; the run-time values they read are its implicit inputs (the
    constants they read are copied in)."""
    name, bodies = ctx.name, []
    for branch in (switch.then, switch.other):
        g, bound = _bind(model, ctx, branch, args, stack)
        body = Graph(model.short(g.name))
        for arg in bound:
            if isinstance(arg, str) and arg not in body.values:
                outer = ctx.value(arg)
                body.values[arg] = dataclasses.replace(outer) if outer.const is not None else \
                    Value(arg, outer.shape, outer.dtype, format=outer.format, dynamic=outer.dynamic)
                if outer.const is None:
                    body.inputs.append(arg)
        result = _inline(model, env, ImportContext(body), node, g, bound, stack)
        if not isinstance(result, str):
            raise NotSupportedError(f"'{model.source}': branch '{model.short(g.name)}' of node '{name}' returns "
                                    f"no single tensor: only such branches are supported")
        body.outputs = [result]
        body.prune()
        bodies.append(body)
    ctx.name, ctx.output = name, model.short(node.output[0])
    captured = list(dict.fromkeys(i for b in bodies for i in b.inputs))
    for b in bodies:                    # one input list for both: each takes every captured value
        for i in captured:
            b.values.setdefault(i, dataclasses.replace(ctx.value(i)))
        b.inputs = list(captured)
    then, other = (b.values[b.outputs[0]] for b in bodies)
    if then.dtype != other.dtype:
        raise ctx.error(f"the branches return {then.dtype} and {other.dtype}")
    same = then.shape == other.shape and not then.dynamic and not other.dynamic
    output = Value(ctx.output, then.shape if same else (-1,) * then.rank, then.dtype, dynamic=not same)
    ctx.emit_control("If", [switch.cond, *captured], [output], bodies, implicit_inputs=len(captured))


def _tuple_arg(entries: list[Entry]) -> Any:
    """A tuple input: a constant when all its elements are (a shape, axes), else its elements (IR names and
    constants: `ImportContext.tensors`)."""
    if all(isinstance(e, Const) for e in entries):
        return Const([e.value for e in entries])
    return _flat(entries)


def attributes(model: Model, node: pb.NodeProto) -> dict[str, Any]:
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
