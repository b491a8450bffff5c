"""TFLite importer rules for WHILE and IF: their subgraphs become bodies of our Loop and If; and CALL_ONCE.

TFLite subgraphs are closed (a body reads only its inputs and its own constants), so nothing is captured: If's
inputs after the condition are the branches' inputs. WHILE runs `while cond(v): v = body(v)`, testing the
condition before every iteration, the first included. Our Loop tests a condition given before the first
iteration and then the one its body returns, so the cond subgraph is inlined twice: once on the WHILE's inputs
(the first test, folded when they are constants) and once on the body's outputs, inside the body (the next
test). The loop has no trip count; every loop-carried value is an output.

CALL_ONCE runs its init subgraph on the first invocation, for that subgraph's effect on resource variables and
hash tables (it has no inputs or outputs). The constants it assigns to resource variables are their initial
values (`converter/frontends/tflite/variables.py`), and the ops reading hash tables are refused, so CALL_ONCE
itself imports as nothing.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.emit import EmitContext
from converter.frontends.tflite.registry import ImportContext, tflite_op
from converter.ir import Graph, Value
from lite.status import GraphFileError


def _unknown(name: str, like: Value) -> Value:
    """A value whose shape is known only at run time (every dim -1, `like`'s rank and dtype)."""
    return Value(name, (-1,) * like.rank, like.dtype, dynamic=True)


def _fixed(name: str, a: Value, b: Value) -> Value:
    """The value `name` as two bodies (or iterations) return it: static when both agree on the shape."""
    same = not a.dynamic and not b.dynamic and a.shape == b.shape
    return Value(name, a.shape, a.dtype) if same else _unknown(name, a)


def _outputs(ctx: ImportContext, body: Graph, option: str, like: list[Value]) -> list[Value]:
    """The body's outputs, checked against `like` in count and dtype."""
    outs = [body.values[o] for o in body.outputs]
    if len(outs) != len(like) or any(o.dtype != v.dtype for o, v in zip(outs, like)):
        raise ctx.error(f"{option} returns {[str(o.dtype) for o in outs]}, expected {[str(v.dtype) for v in like]}",
                        GraphFileError)
    return outs


def _condition(ctx: ImportContext, state: list[Value]) -> Graph:
    cond = ctx.body("CondSubgraphIndex", state)
    _outputs(ctx, cond, "CondSubgraphIndex", [Value("cond", (), np.dtype(np.bool_))])
    return cond


@tflite_op("WHILE")
def while_(ctx: ImportContext) -> None:
    state = [ctx.value(n) for n in ctx.inputs]
    while True:         # until the carried values' shapes are a fixed point
        body = ctx.body("BodySubgraphIndex", state)
        outs = _outputs(ctx, body, "BodySubgraphIndex", state)
        changed = [k for k, (s, o) in enumerate(zip(state, outs)) if not s.dynamic and _fixed("", s, o).dynamic]
        if not changed:
            break
        state = [_unknown(s.name, s) if k in changed else s for k, s in enumerate(state)]
    iteration, cond = body.fresh("iteration"), body.fresh("cond")
    body.values[iteration] = Value(iteration, (), np.dtype(np.int64))
    body.values[cond] = Value(cond, (), np.dtype(np.bool_))
    body.inputs = [iteration, cond, *body.inputs]
    inner, following = EmitContext(body), body.fresh(f"{ctx.name}:cond")
    inner.name = ctx.name
    inner.inline(_condition(ctx, state), body.outputs, [following])
    body.outputs = [following, *body.outputs]
    first = ctx.graph.fresh(f"{ctx.name}:cond")
    ctx.inline(_condition(ctx, [ctx.value(n) for n in ctx.inputs]), ctx.inputs, [first])
    values = [Value(n, s.shape, s.dtype) if not s.dynamic else _unknown(n, s) for n, s in zip(ctx.outputs, state)]
    ctx.emit_control("Loop", ["", first, *ctx.inputs], values, [body], implicit_inputs=0)


@tflite_op("IF")
def if_(ctx: ImportContext) -> None:
    args = ctx.inputs[1:]
    inputs = [ctx.value(a) for a in args]
    known = ctx.const(ctx.input(0))
    if known is not None:       # a branch taken whatever the data
        if known.size != 1:
            raise ctx.error(f"the condition has shape {list(known.shape)}, one element expected")
        branch = ctx.body("ThenSubgraphIndex" if bool(known.reshape(-1)[0]) else "ElseSubgraphIndex", inputs)
        _outputs(ctx, branch, "the taken branch", [ctx.value(o) for o in ctx.outputs])
        ctx.inline(branch, args, ctx.outputs)
        return
    then, other = (ctx.body(option, inputs) for option in ("ThenSubgraphIndex", "ElseSubgraphIndex"))
    expected = [ctx.value(o) for o in ctx.outputs]
    values = [_fixed(n, a, b) for n, a, b in zip(ctx.outputs, _outputs(ctx, then, "ThenSubgraphIndex", expected),
                                                  _outputs(ctx, other, "ElseSubgraphIndex", expected))]
    ctx.emit_control("If", [ctx.input(0), *args], values, [then, other], implicit_inputs=len(args))


@tflite_op("CALL_ONCE")
def call_once(ctx: ImportContext) -> None:
    index = int(ctx.opt("InitSubgraphIndex", -1))
    if ctx.inputs or ctx.outputs:
        raise ctx.error("CALL_ONCE takes no inputs and has no outputs", GraphFileError)
    if not 0 < index < ctx.subgraphs:
        raise ctx.error(f"InitSubgraphIndex {index} is not a subgraph of the file (it has {ctx.subgraphs}; "
                        "subgraph 0 is the main graph)", GraphFileError)
