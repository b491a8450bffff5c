"""Graph facts shared by the converter (its IR of named values) and the runtime (tensor indices): execution
order and when a node returns its input. Each side applies them to its own graph form; neither restates them."""
from __future__ import annotations

import heapq
from typing import Callable, Collection, Hashable, Sequence

import numpy as np

from lite.traits import ALWAYS, IDENTITY_PERM, SAME_DTYPE, SAME_SHAPE, traits


def topological_order(needs: Sequence[Collection[Hashable]], makes: Sequence[Collection[Hashable]]) -> list[int]:
    """Node indices in an order where each node comes after the producers of what it `needs` (values that
    are ready from the start, such as constants and graph inputs, left out). Among ready nodes the lowest
    index goes first, so an order that is already valid is kept. Shorter than `needs` when the nodes left
    out wait on a cycle or on a value nothing makes."""
    waiting = [set(n) for n in needs]
    readers: dict[Hashable, list[int]] = {}
    for i, deps in enumerate(waiting):
        for v in deps:
            readers.setdefault(v, []).append(i)
    queue = [i for i, deps in enumerate(waiting) if not deps]
    order: list[int] = []
    while queue:
        i = heapq.heappop(queue)
        order.append(i)
        for v in makes[i]:
            for r in readers.get(v, ()):
                if v in waiting[r]:
                    waiting[r].discard(v)
                    if not waiting[r]:
                        heapq.heappush(queue, r)
    return order


def returns_input(op: str, training: bool, perm: Sequence[int] | None, x: tuple[Sequence[int], np.dtype],
                  y: tuple[Sequence[int], np.dtype]) -> bool:
    """True when a one-output node of `op` returns its input unchanged (`traits(op).noop`); `x` and `y` are
    the (shape, dtype) of its input and output (-1 for dims unknown until run time), `training` its
    `training` attribute, `perm` its `perm` attribute."""
    t = traits(op)
    if t.noop is None or training and t.train is not None and t.train.flag:
        return False
    if t.noop == SAME_DTYPE:
        return x[1] == y[1]
    if t.noop == IDENTITY_PERM:
        return [int(p) for p in (perm if perm is not None else ())] == list(range(len(x[0])))
    if t.noop == SAME_SHAPE:
        return all(d >= 0 for d in x[0]) and tuple(x[0]) == tuple(y[0])
    return t.noop == ALWAYS


def forwards(out: Hashable, source: Hashable,
             producer: Callable[[Hashable], tuple[str, Sequence[Hashable]] | None]) -> bool:
    """True when value `out` is `source` itself, or `source` passed on through nodes that always return their
    input (Identity); `producer(v)` gives the op and inputs of the node making `v` (None when none does). A Loop
    body's condition output that forwards its condition input keeps the loop's trip count known."""
    while out != source:
        made = producer(out)
        if made is None or traits(made[0]).noop != ALWAYS or not made[1]:
            return False
        out = made[1][0]
    return True
