"""Loop (ONNX semantics): run the body while the iteration count is below max_trip_count and the condition
holds; the body gets the iteration number, the condition and the carried values, and returns the next
condition, the next carried values and one slice of each scan output (stacked on a new axis 0).

Static when the compiled body keeps the carried values' shapes and, if there are scan outputs, the trip count
is known at compile time (a known max_trip_count with a condition that stays true: a constant, or the body's
condition input passed through). Otherwise the count or the shapes are known only by running, so `infer`
runs the loop (the node is in the session's dynamic part) and `run` copies the results out.

A loop that provably never ends is refused instead of hanging: without a max_trip_count, at load when its
condition is absent, or known true and passed through (or a constant true) by the body; at run time after the
first iteration when the body's condition reads only values that do not change between iterations and it is
still true (every later iteration computes the same condition). A condition computed from changing values runs
as written, as in onnxruntime (scan outputs are bounded by the memory limit), up to `MAX_ITERATIONS` when a
service reading untrusted models sets it (the fuzz harnesses do).
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from lite.compiler import check_memory
from lite.kernel import TensorSpec, kernels_of, register
from lite.model import SubGraphDef
from lite.rewrites import forwards
from lite.kernels.control_flow.body import ControlFlowKernel, same_specs, spec_of
from lite.traits import Bodies, declare

declare("Loop", bodies=Bodies(("body",), inputs_from=2, body_inputs_from=2, body_outputs_from=1))

MAX_ITERATIONS: int | None = None      # None: a data-dependent loop runs as long as its model says
_ITERATION = TensorSpec((), np.dtype(np.int64))
_CONDITION = TensorSpec((), np.dtype(np.bool_))


def _varies(op: str) -> bool:
    """Whether the op's results may differ between runs on the same inputs (random draws: unfoldable kernels)."""
    return any(not cls.foldable for cls in kernels_of(op).values())


def condition_repeats(sub: SubGraphDef, carried: int) -> bool:
    """Whether a Loop body's condition output reads only values that stay the same from one iteration to the
    next: its condition input, captured values, carried values it passes on unchanged, constants; not the
    iteration number, a carried value it changes, a node that may return other values on the same inputs, or
    a nested body (not looked into). Then an iteration given the condition true that returns it true is
    followed by identical ones forever."""
    made = {t: n for n in sub.nodes for t in n.outputs}
    producers = {t: (n.op, n.inputs) for t, n in made.items()}
    changing = {sub.inputs[0]} | {i for i, o in zip(sub.inputs[2:2 + carried], sub.outputs[1:1 + carried])
                                  if not forwards(o, i, producers.get)}
    todo, seen = [sub.outputs[0]], set()
    while todo:
        v = todo.pop()
        if v < 0 or v in seen:
            continue
        seen.add(v)
        node = made.get(v)
        if v in changing or node is not None and (node.bodies or _varies(node.op)):
            return False
        todo.extend(node.inputs if node is not None else ())
    return True


@register("Loop")
class LoopKernel(ControlFlowKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        trip, cond = inputs[0], inputs[1]
        if trip is None and cond is None:
            raise self.error("neither max_trip_count nor a condition is given: the loop would never end")
        self.carried = len(inputs) - 2 - self.attrs.implicit_inputs
        if not 0 <= self.carried <= len(self.node.outputs):
            raise self.error(f"{len(inputs)} inputs with {self.attrs.implicit_inputs} captured values leave "
                             f"{self.carried} carried values for {len(self.node.outputs)} outputs")
        state, captured = list(inputs[2:2 + self.carried]), list(inputs[2 + self.carried:])
        self.result = None
        body = self.body(0, [_ITERATION, _CONDITION, *state, *captured])
        self.repeats = trip is None and condition_repeats(self.node.bodies[0], self.carried)
        if trip is None and cond.value is not None and self.truth(cond.value, "the condition") and \
                self.condition_stays(body):
            raise self.error("the condition is true and the body returns it unchanged, with no max_trip_count: "
                             "the loop would never end")
        outs = body.output_specs()
        if outs is not None and same_specs(outs[1:1 + self.carried], state):
            scans = outs[1 + self.carried:]
            count = self.static_count(trip, cond, body) if scans else 0
            if count is not None:
                check_memory(count * sum(s.nbytes for s in scans), f"the scan outputs of Loop node '{self.node.name}'")
                return [*state, *(TensorSpec((count, *s.shape), s.dtype) for s in scans)]
        values = self.values(inputs, "an input (the loop's shapes are known only by running it)")
        scans: list[list[np.ndarray]] = [[] for _ in self.node.outputs[self.carried:]]
        final = values[2:2 + self.carried]
        size = 0
        for slices in self.iterations(values, final):
            for acc, s in zip(scans, slices):
                acc.append(np.array(s))
                size += s.nbytes
            check_memory(size, f"the scan outputs of Loop node '{self.node.name}'")
        empty = outs[1 + self.carried:] if outs is not None else [None] * len(scans)
        stacked = [np.stack(acc) if acc else np.zeros((0, *(e.shape if e else ())), e.dtype if e else np.float32)
                   for acc, e in zip(scans, empty)]
        return self.keep([*final, *stacked])

    def static_count(self, trip: TensorSpec | None, cond: TensorSpec | None, body) -> int | None:
        """The number of iterations when compile time knows it, else None."""
        if trip is None or trip.value is None or cond is not None and cond.value is None:
            return None
        if not self.condition_stays(body):
            return None
        start = cond is None or self.truth(cond.value, "the condition")
        return max(int(self.element(trip.value, 'max_trip_count')), 0) if start else 0

    def condition_stays(self, body) -> bool:
        """Whether the compiled body returns a constant true condition or its condition input unchanged."""
        out = body.sub.outputs[0]
        made = {t: (n.op, n.inputs) for n in body.sub.nodes for t in n.outputs}
        value = body.plan.specs[out].value if body.plan.specs[out] is not None else None
        return self.truth(value, "the body's condition") if value is not None \
            else forwards(out, body.sub.inputs[1], made.get)

    def iterations(self, values: Sequence[np.ndarray | None], state: list[np.ndarray]) -> Iterator[list[np.ndarray]]:
        """Run the body until the count or the condition stops it, updating `state` (the carried values) in
        place; yields each iteration's scan slices (views valid until the next iteration)."""
        trip = None if values[0] is None else int(self.element(values[0], 'max_trip_count'))
        cond = True if values[1] is None else self.truth(values[1], "the condition")
        captured = values[2 + self.carried:]
        it = 0
        while cond and (trip is None or it < trip):
            if MAX_ITERATIONS is not None and it >= MAX_ITERATIONS:
                raise self.error(f"the loop runs past {MAX_ITERATIONS} iterations, the limit (MAX_ITERATIONS)")
            body = self.body(0, [_ITERATION, _CONDITION, *map(spec_of, state), *map(spec_of, captured)])
            outs = body.run([np.array(it, np.int64), np.array(cond), *state, *captured])
            cond = self.truth(outs[0], "the body's condition")
            if cond and self.repeats:
                raise self.error("the condition stays true and reads nothing that changes between iterations, "
                                 "with no max_trip_count: the loop would never end")
            state[:] = [np.array(o) for o in outs[1:1 + self.carried]]
            yield outs[1 + self.carried:]
            it += 1

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        if self.copy_result(outputs):
            return
        state = [np.array(x) for x in inputs[2:2 + self.carried]]
        for it, slices in enumerate(self.iterations(inputs, state)):
            for out, s in zip(outputs[self.carried:], slices):
                out[it] = s
        for out, value in zip(outputs, state):
            np.copyto(out, value)
