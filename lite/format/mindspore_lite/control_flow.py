"""MindSpore Lite's control flow rebuilt as our If and Loop nodes.

The official converter writes control flow as calls between subgraphs: `PartialFusion` binds a subgraph to
argument tensors, `Switch` picks one of two partials by a condition and `Call` runs the partial it is given,
whose outputs are the subgraph's. An if/else is a Switch between two branch subgraphs; a while loop is a header
subgraph computing the condition and calling, by a Switch, either the body (whose last act is to call the header
again with the next values) or the exit. Our runtime has no calls, so each subgraph's nodes are copied where
they run: a direct call is inlined, an if/else becomes an `If` whose branches are the two subgraphs, a while
loop becomes a `Loop` carrying the header's inputs: the header's condition computed once before the loop on the
initial values and, in the loop's body, on the next values; the exit inlined after the loop on the final values.
A subgraph may make several calls (an if/else inside a loop's body, a loop after another), copied in the order
their inputs allow among its nodes, so control flow nests.
Any other use of the calls (a subgraph calling itself other than as a while body, a Call of anything but a
partial or a Switch of two partials) is refused with `NotSupportedError` naming the subgraph.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Callable, NamedTuple

from lite.dtypes import DataType
from lite.format.fields import int_vector, text
from lite.format.graph import Part
from lite.model import NodeDef, TensorDef
from lite.status import GraphFileError, NotSupportedError
from schema import attrs as op_attrs
from schema import fb as ours

CALL_OPS = ("PartialFusion", "Switch", "Call")     # the official primitives this module rebuilds


@dataclass
class CallSite:
    """A Call node: the partial or Switch it runs, what it reads (ordered among the nodes by it) and writes."""
    callee: int
    outputs: list[int]
    inputs: list[int] = field(default_factory=list)     # the partials' arguments and the Switch's condition


@dataclass
class Subgraph:
    """One official subgraph: its interface, its translated nodes and its calls, by the tensors they write."""
    name: str
    inputs: list[int]
    outputs: list[int]
    nodes: list[NodeDef] = field(default_factory=list)
    partials: dict[int, tuple[int, list[int]]] = field(default_factory=dict)   # out -> (subgraph, arguments)
    switches: dict[int, tuple[int, int, int]] = field(default_factory=dict)    # out -> (condition, then, else)
    calls: list[CallSite] = field(default_factory=list)


def _add_call_node(sub: Subgraph, subgraphs: int, name: str, op: str, table: Any, inputs: list[int],
                  outputs: list[int]) -> None:
    """Record one PartialFusion, Switch or Call node of `sub` (`subgraphs`: how many the file has)."""
    if op == "PartialFusion":
        index = table.SubGraphIndex()
        if len(outputs) != 1 or not 0 <= index < subgraphs:
            raise GraphFileError(f"PartialFusion node '{name}' calls subgraph {index} with {len(outputs)} "
                                 f"outputs, but the model has {subgraphs} subgraphs")
        sub.partials[outputs[0]] = (index, inputs)
    elif op == "Switch":
        if len(inputs) != 3 or len(outputs) != 1:
            raise NotSupportedError(f"Switch node '{name}' has {len(inputs)} inputs and {len(outputs)} outputs: "
                                    f"only a condition choosing between two partials is supported")
        sub.switches[outputs[0]] = (inputs[0], inputs[1], inputs[2])
    else:
        if len(inputs) != 1:
            raise NotSupportedError(f"Call node '{name}' has {len(inputs)} inputs: only the call of one partial "
                                    f"is supported")
        sub.calls.append(CallSite(inputs[0], outputs))


class WhileLoop(NamedTuple):
    """A while loop as its header's Switch states it, in the header's tensors and subgraph indices."""
    condition: int
    body: int
    body_args: list[int]
    back: tuple[CallSite, list[int]]     # the body's call of the header, with the next values of its inputs
    exit: int
    exit_args: list[int]


class Rebuild:
    """Our nodes and bodies for the official subgraphs, starting from the main one (subgraph 0)."""

    def __init__(self, tensors: list[TensorDef], subs: list[Subgraph]):
        self.tensors, self.subs = tensors, subs
        self.nodes: list[NodeDef] = []
        self.parts: list[Part] = []
        self.running: list[int] = []      # the subgraphs being copied, outermost first
        self.written = {t for sub in subs for t in (*sub.inputs, *(o for n in sub.nodes for o in n.outputs),
                                                   *(o for c in sub.calls for o in c.outputs))}

    def main(self) -> tuple[list[NodeDef], list[Part]]:
        main = self.subs[0]
        self._copy(0, {t: t for t in main.inputs}, None, keep=True)
        return self.nodes, self.parts

    # ---- tensors and nodes ----------------------------------------------------------------------------------
    def _fresh(self, like: int) -> int:
        """A new computed tensor like tensor `like` (a copy's own tensor): its index."""
        self.tensors.append(replace(self.tensors[like], index=len(self.tensors), data=None,
                                    node_type=ours.NodeType.CNODE))
        return len(self.tensors) - 1

    def _scalar(self, name: str, data_type: int) -> int:
        self.tensors.append(TensorDef(len(self.tensors), name, ours.NodeType.CNODE, data_type, (), ours.Format.ND))
        return len(self.tensors) - 1

    def _emit(self, node: NodeDef, members: list[int] | None) -> None:
        if members is not None:
            members.append(len(self.nodes))
        self.nodes.append(node)

    def _reads(self, sub: Subgraph, callee: int) -> list[int]:
        """The tensors of `sub` a call of `callee` reads."""
        if callee in sub.switches:
            cond, then, other = sub.switches[callee]
            return [cond, *self._partial(sub, then)[1], *self._partial(sub, other)[1]]
        return list(self._partial(sub, callee)[1])

    def _value(self, env: dict[int, int], t: int, sub: Subgraph) -> int:
        """The tensor standing for `sub`'s tensor `t` where `sub` is being copied."""
        if t < 0 or t in env:
            return env.get(t, t)
        if t not in self.written:       # a constant (or an empty one, as Reduce's "all axes")
            return t
        raise NotSupportedError(f"subgraph '{sub.name}' reads tensor '{self.tensors[t].name}', which is neither "
                                f"its input nor made before it is read")

    # ---- copying a subgraph -----------------------------------------------------------------------------------
    def _copy(self, s: int, env: dict[int, int], members: list[int] | None, keep: bool = False,
              targets: list[int] | None = None, skip: CallSite | None = None) -> tuple[list[int], dict[int, int]]:
        """Copy subgraph `s` (its inputs bound by `env`) into the graph whose node indices go to `members` (None:
        the main graph); return its outputs and its tensors as copied. `keep`: its tensors are used as they are
        (the main graph, copied once); `targets`: the tensors its outputs must be; `skip`: a call not made (a while
        body's call back to its header, which is the loop's next iteration)."""
        sub = self.subs[s]
        if s in self.running:
            raise NotSupportedError(f"subgraph '{sub.name}' calls itself other than as a while loop: this control "
                                    f"flow is not supported")
        self.running.append(s)
        env = dict(env)
        if targets is not None:
            for o, t in zip(sub.outputs, targets):
                if o not in env and not self.tensors[o].is_const:
                    env[o] = t
        for site in sub.calls:
            site.inputs = self._reads(sub, site.callee)
        for item in _ordered([*sub.nodes, *(c for c in sub.calls if c is not skip)]):
            outputs = [env.setdefault(o, o if keep else self._fresh(o)) for o in item.outputs]
            if isinstance(item, CallSite):
                self._call(sub, env, item.callee, outputs, members)
            else:
                self._emit(replace(item, inputs=[self._value(env, i, sub) for i in item.inputs], outputs=outputs),
                           members)
        results = [self._value(env, o, sub) for o in sub.outputs] if skip is None else []
        if targets is not None:
            for k, (r, t) in enumerate(zip(results, targets)):
                if r != t:      # an output passed through from an input or a constant
                    self._emit(NodeDef(f"{sub.name}/output_{k}", "Identity", op_attrs.build("Identity", {}), [r],
                                       [t]), members)
            results = list(targets)
        self.running.pop()
        return results, env

    def _call(self, sub: Subgraph, env: dict[int, int], callee: int, outputs: list[int],
              members: list[int] | None) -> None:
        """One Call of `sub` writing `outputs`: a direct call inlined, a Switch as an If, a header as a Loop."""
        if callee in sub.switches:
            cond, then, other = sub.switches[callee]
            self._if(sub, env, cond, self._partial(sub, then), self._partial(sub, other), outputs, members)
            return
        target, args = self._partial(sub, callee)
        header = self.subs[target]
        if len(args) != len(header.inputs):
            raise GraphFileError(f"subgraph '{header.name}' takes {len(header.inputs)} inputs, but is called from "
                                 f"'{sub.name}' with {len(args)}")
        values = [self._value(env, a, sub) for a in args]
        loop = self._loop_parts(target)
        if loop is None:
            self._copy(target, dict(zip(header.inputs, values)), members, targets=outputs)
        else:
            self._loop(target, loop, values, outputs, members)

    def _partial(self, sub: Subgraph, t: int) -> tuple[int, list[int]]:
        if t not in sub.partials:
            raise NotSupportedError(f"subgraph '{sub.name}' calls tensor '{self.tensors[t].name}', which is not "
                                    f"a PartialFusion of it")
        return sub.partials[t]

    def _if(self, sub: Subgraph, env: dict[int, int], cond: int, then: tuple[int, list[int]],
            other: tuple[int, list[int]], outputs: list[int], members: list[int] | None) -> None:
        """An If whose inputs are the branches' arguments, each once; a branch ignores those it is not given."""
        args = list(dict.fromkeys(self._value(env, a, sub) for a in (*then[1], *other[1])))
        indices = []
        for s, own in (then, other):
            branch = self.subs[s]
            if len(own) != len(branch.inputs) or len(branch.outputs) != len(outputs):
                raise GraphFileError(f"subgraph '{branch.name}' takes {len(branch.inputs)} inputs and returns "
                                     f"{len(branch.outputs)}, but '{sub.name}' calls it with {len(own)} and "
                                     f"takes {len(outputs)}")
            inputs = [self._fresh(a) for a in args]
            mine = [inputs[args.index(self._value(env, a, sub))] for a in own]
            indices.append(self._body(s, dict(zip(branch.inputs, mine)), inputs))
        self._emit(NodeDef(f"{sub.name}/if", "If", op_attrs.build("If", dict(
            then_branch=indices[0], else_branch=indices[1])), [self._value(env, cond, sub), *args], outputs),
            members)

    def _body(self, s: int, env: dict[int, int], inputs: list[int]) -> int:
        """A new body part: subgraph `s` copied with inputs `inputs`; its index."""
        index = len(self.parts)
        self.parts.append(Part(self.subs[s].name, [], [], []))
        members: list[int] = []
        outputs, _ = self._copy(s, env, members)
        self.parts[index] = Part(self.subs[s].name, inputs, outputs, members)
        return index

    # ---- while loops ------------------------------------------------------------------------------------------
    def _loop_parts(self, h: int) -> WhileLoop | None:
        """The while loop whose header is `h`, or None when `h` is not a header."""
        header = self.subs[h]
        if len(header.calls) != 1 or header.calls[0].callee not in header.switches:
            return None
        cond, then, other = header.switches[header.calls[0].callee]
        (b, b_args), (x, x_args) = self._partial(header, then), self._partial(header, other)
        back = self._calls_back(b, h)
        if back is None:
            if self._calls_back(x, h) is not None:
                raise NotSupportedError(f"subgraph '{header.name}' loops while its condition is false: not "
                                        f"supported")
            return None
        return WhileLoop(cond, b, b_args, back, x, x_args)

    def _calls_back(self, s: int, h: int) -> tuple[CallSite, list[int]] | None:
        """The call by which subgraph `s` ends calling header `h` (its outputs are the subgraph's) and its
        arguments, or None."""
        sub = self.subs[s]
        for site in sub.calls:
            target = sub.partials.get(site.callee)
            if target is not None and target[0] == h and site.outputs == sub.outputs:
                return site, target[1]
        return None

    def _header(self, h: int, values: list[int], members: list[int] | None, wanted: list[int]) -> list[int]:
        """The header's tensors `wanted` on its input `values`: its nodes are copied unless all are inputs (or
        constants)."""
        header = self.subs[h]
        env = dict(zip(header.inputs, values))
        for node in _ordered(header.nodes) if set(wanted) & self.written - set(header.inputs) else ():
            outputs = [env.setdefault(o, self._fresh(o)) for o in node.outputs]
            self._emit(replace(node, inputs=[self._value(env, i, header) for i in node.inputs], outputs=outputs),
                       members)
        return [self._value(env, t, header) for t in wanted]

    def _loop(self, h: int, parts: WhileLoop, values: list[int], outputs: list[int],
              members: list[int] | None) -> None:
        """A Loop node carrying the header's inputs (from `values`), then the exit writing `outputs`."""
        cond, b, b_args, (tail, back), x, x_args = parts
        header, body = self.subs[h], self.subs[b]
        if len(b_args) != len(body.inputs) or len(back) != len(header.inputs):
            raise GraphFileError(f"while loop '{header.name}': subgraph '{body.name}' is called with "
                                 f"{len(b_args)} arguments for {len(body.inputs)} inputs")
        [first] = self._header(h, values, members, [cond])
        # The Loop's body: the header's inputs carried; the official body on them, then the next condition.
        index = len(self.parts)
        self.parts.append(Part(body.name, [], [], []))
        inner: list[int] = []
        carried = [self._fresh(t) for t in header.inputs]
        inputs = [self._scalar(f"{header.name}/iteration", DataType.INT64),
                  self._scalar(f"{header.name}/condition", DataType.BOOL), *carried]
        self.running.append(h)
        body_env = dict(zip(body.inputs, self._header(h, carried, inner, b_args)))
        _, made = self._copy(b, body_env, inner, skip=tail)
        following = [self._value(made, a, body) for a in back]
        [after] = self._header(h, following, inner, [cond])
        self.running.pop()
        self.parts[index] = Part(body.name, inputs, [after, *following], inner)
        finals = [self._fresh(t) for t in header.inputs]
        self._emit(NodeDef(f"{header.name}/while", "Loop", op_attrs.build("Loop", dict(body=index)),
                           [-1, first, *values], finals), members)
        # The exit on the final values.
        exit_ = self.subs[x]
        if len(x_args) != len(exit_.inputs):
            raise GraphFileError(f"while loop '{header.name}': subgraph '{exit_.name}' is called with "
                                 f"{len(x_args)} arguments for {len(exit_.inputs)} inputs")
        self.running.append(h)
        self._copy(x, dict(zip(exit_.inputs, self._header(h, finals, members, x_args))), members, targets=outputs)
        self.running.pop()


def _ordered(nodes: list[Any]) -> list[Any]:
    """`nodes` (NodeDefs and CallSites) in an order where each is after the nodes making its inputs (the file's
    order when it is one)."""
    made = {t for n in nodes for t in n.outputs}
    ready: set[int] = set()
    pending, ordered = list(nodes), []
    while pending:
        rest = [n for n in pending if not all(i not in made or i in ready for i in n.inputs)]
        if len(rest) == len(pending):
            return ordered + rest       # a cycle: left for the graph checks to name
        waiting = {id(n) for n in rest}
        ordered += [n for n in pending if id(n) not in waiting]
        ready.update(t for n in ordered for t in n.outputs)
        pending = rest
    return ordered


def rebuild(tensors: list[TensorDef], nodes: list[NodeDef], spans: dict[int, tuple[int, int]],
            calls: dict[int, tuple], subgraphs: list[Any],
            check_index: Callable[[int, str], int]) -> tuple[list[NodeDef], list[Part]]:
    """Our nodes and bodies for a file of several subgraphs (`subgraphs`: its SubGraph tables): `nodes` are the
    translated nodes, `spans[k]` the range of them official node k became, `calls[k]` the arguments of
    `_add_call_node` for its PartialFusion, Switch and Call nodes; `check_index(t, where)` checks a tensor
    index."""
    subs, owner = [], {}
    for s, table in enumerate(subgraphs):
        name = text(table.Name(), f"subgraph_{s}")
        sub = Subgraph(name, [check_index(t, f"subgraph '{name}' input") for t in int_vector(table, "InputIndices")],
                       [check_index(t, f"subgraph '{name}' output") for t in int_vector(table, "OutputIndices")])
        for k in int_vector(table, "NodeIndices"):
            if k in owner or not (k in spans or k in calls):
                raise GraphFileError(f"subgraph '{name}' lists node {k}, which is "
                                     f"{'in another subgraph' if k in owner else 'not in the model'}")
            owner[k] = s
            if k in calls:
                _add_call_node(sub, len(subgraphs), *calls[k])
            else:
                sub.nodes.extend(nodes[slice(*spans[k])])
        subs.append(sub)
    stray = next((k for k in (*spans, *calls) if k not in owner), None)
    if stray is not None:
        raise GraphFileError(f"node {stray} belongs to no subgraph")
    return Rebuild(tensors, subs).main()
