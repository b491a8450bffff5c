"""ONNX importer rules for control flow: If, Loop and Scan, every opset (If 1-21+, Loop 1-21+, Scan 8-21+).

Their graph attributes are imported recursively into bodies (`ImportContext.subgraph`); the outer-scope values a
body reads become trailing inputs of the node (`implicit_inputs`). An If whose condition is known when it is
imported is replaced by its taken branch, inlined. The rules derive the node's output values from the bodies:
static where the bodies fix them (both branches agree; carried values keep their shapes; a Loop's trip count is
a constant), dynamic otherwise. Bodies of Loop and Scan are imported until their carried values' shapes are a
fixed point: a carried value whose shape changes between iterations is a placeholder of unknown shape, so nothing
in the body folds on its first iteration's shape. Sequence- and optional-typed values are not supported.
"""
from __future__ import annotations

import numpy as np
import onnx

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.ir import Graph, Value
from lite.rewrites import forwards
from lite.status import InvalidOpAttrError

_ITERATION = Value("iteration", (), np.dtype(np.int64))
_CONDITION = Value("cond", (), np.dtype(np.bool_))


def _unknown(name: str, like: Value) -> Value:
    """A value whose shapes are known only at run time (all dims -1, `like`'s rank and dtype)."""
    return Value(name, (-1,) * like.rank, like.dtype, format=like.format, dynamic=True)


def _same(a: Value, b: Value) -> bool:
    return not a.dynamic and not b.dynamic and a.shape == b.shape and a.dtype == b.dtype


def _outputs(body: Graph) -> list[Value]:
    return [body.values[o] for o in body.outputs]


def _body(ctx: ImportContext, attr: str) -> onnx.GraphProto:
    """The graph attribute `attr`; refused when it is missing or has sequence or optional inputs or outputs."""
    g = ctx.attr(attr)
    if not isinstance(g, onnx.GraphProto):
        raise ctx.error(f"graph attribute '{attr}' is missing", InvalidOpAttrError)
    for vi in [*g.input, *g.output]:
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise ctx.error(f"subgraph '{g.name}' has {vi.type.WhichOneof('value')} value '{vi.name}': only "
                            f"tensors are supported")
    return g


def _stable_body(ctx: ImportContext, attr: str, head: list[Value], state: list[Value], tail: list[Value],
                 lead: int) -> tuple[Graph, list[Value]]:
    """Import the body `attr` with inputs head + state + tail until the state's shapes are a fixed point: a state
    value whose body output (at `lead` + k) differs from it becomes a placeholder of unknown shape."""
    g = _body(ctx, attr)
    while True:
        body = ctx.subgraph(g, [*head, *state, *tail])
        outs = _outputs(body)[lead:lead + len(state)]
        changed = [k for k, (s, o) in enumerate(zip(state, outs)) if not s.dynamic and not _same(s, o)]
        if not changed:
            return body, state
        for k in changed:
            state[k] = _unknown(state[k].name, state[k])


def _captured(body: Graph, own: int) -> list[str]:
    """The outer-scope values `body` reads (its inputs after its `own`)."""
    return body.inputs[own:]


# ---- If -----------------------------------------------------------------------------------------------------------
@onnx_op("If")
def if_(ctx: ImportContext) -> None:
    cond = ctx.const(ctx.input(0))
    if cond is not None:
        if cond.size != 1:
            raise ctx.error(f"the condition has shape {list(cond.shape)}, one element expected")
        branch = ctx.subgraph(_body(ctx, "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"), [])
        ctx.inline(branch, branch.inputs, ctx.outputs)
        return
    branches = []
    for attr in ("then_branch", "else_branch"):
        branches.append(ctx.subgraph(_body(ctx, attr), []))
    captured = list(dict.fromkeys(name for b in branches for name in b.inputs))
    for b in branches:                  # one input list for both: each takes every captured value
        for name in captured:
            if name not in b.inputs:
                b.values[name] = Value(name, ctx.value(name).shape, ctx.value(name).dtype, dynamic=ctx.value(name).dynamic)
        b.inputs = list(captured)
    values = []
    for name, then, other in zip(ctx.outputs, *map(_outputs, branches)):
        if then.dtype != other.dtype:
            raise ctx.error(f"output '{name}' is {then.dtype} in the then-branch, {other.dtype} in the else-branch")
        values.append(Value(name, then.shape, then.dtype) if _same(then, other) else _unknown(name, then))
    ctx.emit_control("If", [ctx.input(0), *captured], values, branches, implicit_inputs=len(captured))


# ---- Loop ---------------------------------------------------------------------------------------------------------
@onnx_op("Loop")
def loop(ctx: ImportContext) -> None:
    trip, cond, carried = ctx.input(0), ctx.input(1), ctx.inputs[2:]
    state = [Value(v, ctx.value(v).shape, ctx.value(v).dtype, dynamic=ctx.value(v).dynamic) for v in carried]
    body, state = _stable_body(ctx, "body", [_ITERATION, _CONDITION], state, [], 1)
    captured = _captured(body, 2 + len(carried))
    outs = _outputs(body)
    m, start = ctx.const(trip), ctx.const(cond)
    count = None
    if m is not None and (not cond or start is not None) and _stays_true(body):
        count = max(int(m.reshape(-1)[0]), 0) if not cond or bool(start.reshape(-1)[0]) else 0
    values = [Value(n, s.shape, s.dtype) if not s.dynamic else _unknown(n, s)
              for n, s in zip(ctx.outputs, state)]
    for name, s in zip(ctx.outputs[len(carried):], outs[1 + len(carried):]):
        values.append(Value(name, (count, *s.shape), s.dtype) if count is not None and not s.dynamic
                      else _unknown(name, Value(name, (-1, *s.shape), s.dtype)))
    ctx.emit_control("Loop", [trip, cond, *carried, *captured], values, [body], implicit_inputs=len(captured))


def _stays_true(body: Graph) -> bool:
    """The body's condition output is always true: a true constant, or its condition input passed through."""
    out = body.outputs[0]
    value = body.const(out)
    if value is not None:
        return value.size == 1 and bool(value.reshape(-1)[0])
    made = {o: (n.op, n.inputs) for n in body.nodes for o in n.outputs}
    return forwards(out, body.inputs[1], made.get)


# ---- Scan ---------------------------------------------------------------------------------------------------------
@onnx_op("Scan")
def scan(ctx: ImportContext) -> None:
    if not isinstance(ctx.attr("num_scan_inputs"), int):
        raise ctx.error("attribute 'num_scan_inputs' is required", InvalidOpAttrError)
    m = ctx.attr("num_scan_inputs")
    batched = ctx.opset < 9
    inputs = ctx.inputs[1:] if batched else ctx.inputs
    if batched and ctx.input(0):
        raise ctx.error("sequence_lens (Scan-8) is not supported")
    n = len(inputs) - m
    if n < 0:
        raise ctx.error(f"num_scan_inputs {m} exceeds the {len(inputs)} inputs")
    lead = 1 if batched else 0
    per = [ctx.value(v) for v in inputs]
    per = [Value(v.name, v.shape[lead:], v.dtype, dynamic=v.dynamic) for v in per]
    in_axes = [a + per[n + k].rank if a < 0 else a for k, a in
               enumerate(ctx.attr("scan_input_axes", [0] * m))] if not batched else [0] * m
    directions = ctx.attr("directions" if batched else "scan_input_directions", [0] * m)
    slices = [Value(v.name, v.shape[:a] + v.shape[a + 1:], v.dtype, dynamic=v.dynamic)
              for v, a in zip(per[n:], in_axes)]
    body, state = _stable_body(ctx, "body", [], per[:n], slices, 0)
    captured = _captured(body, len(inputs))
    outs = _outputs(body)[n:]
    out_axes = [] if batched else list(ctx.attr("scan_output_axes", []))
    lengths = {v.shape[a] for v, a in zip(per[n:], in_axes) if not v.dynamic}
    length = lengths.pop() if len(lengths) == 1 and not any(v.dynamic for v in per[n:]) else -1
    batch = ctx.value(inputs[0]).shape[:1] if batched and inputs else ()
    values = [Value(name, batch + s.shape, s.dtype) if not s.dynamic else _unknown(name, Value(name, batch + s.shape, s.dtype))
              for name, s in zip(ctx.outputs, state)]
    for k, (name, s) in enumerate(zip(ctx.outputs[n:], outs)):
        axis = out_axes[k] if k < len(out_axes) else 0
        axis = axis + s.rank + 1 if axis < 0 else axis
        shape = batch + s.shape[:axis] + (length,) + s.shape[axis:]
        values.append(Value(name, shape, s.dtype) if not s.dynamic and length >= 0 else
                      _unknown(name, Value(name, shape, s.dtype)))
    ctx.emit_control("Scan", [*inputs, *captured], values, [body], implicit_inputs=len(captured),
                     num_scan_inputs=m, scan_input_axes=in_axes, scan_input_directions=list(directions),
                     scan_output_axes=out_axes, scan_output_directions=list(ctx.attr("scan_output_directions", [])),
                     batched=batched)
