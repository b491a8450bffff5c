"""bprop rules of the broadcasting and index ops, written with forward ops: the gradient of a broadcast (Expand,
Tile) is a sum over the copies, the gradient of a gather is a scatter-add of dy into zeros, and the gradient of a
scatter is dy with the overwritten entries cleared (for its data) and dy gathered back (for its updates).

Shapes are those the converter knows; Tile needs them static.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Value
from converter.train.bprop.rule import Bprop, Grads, bprop
from converter.train.bprop.shape import _zeros_like
from lite import dtypes
from lite.kernels.tile import interleaved
from lite.status import NotSupportedError
from schema import fb

R = fb.ScatterReduction


def _const(g: Bprop, array: np.ndarray, hint: str) -> str:
    return g.graph.add_const(array, f"{g.prefix}/{hint}")


def _sum(g: Bprop, dy: str, axes: list[int], keep_dims: bool) -> str:
    """dy summed over `axes`."""
    shape = g.value(dy).shape
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape) if keep_dims or a not in axes)
    axes_const = _const(g, np.array(axes, np.int64), "sum_axes")
    like = Value("", kept, g.value(dy).dtype)
    return g.emit("Reduce", [dy, axes_const], [like], mode=fb.ReduceMode.SUM, keep_dims=keep_dims)[0]


@bprop("Expand", wrt=(0,))
def expand(g: Bprop) -> Grads:
    """dy summed over the axes x was broadcast along (leading ones, and x's size-1 dims), reshaped to x."""
    if not g.needs(0):
        return []
    x = g.node.inputs[0]
    lead = g.value(g.node.outputs[0]).rank - g.value(x).rank
    axes = list(range(lead)) + [lead + a for a, d in enumerate(g.value(x).shape) if d == 1]
    if not axes:
        return [g.dy]
    return [g.grad("ReshapeGrad", [_sum(g, g.dy, axes, keep_dims=True), x], 0)]


@bprop("Tile", wrt=(0,))
def tile(g: Bprop) -> Grads:
    """dy viewed as [r0, d0, r1, d1, ...] and summed over the repeat axes."""
    if not g.needs(0):
        return []
    x = g.node.inputs[0]
    shape, repeats = g.value(x).shape, g.graph.const(g.node.inputs[1])
    if repeats is None or min(shape, default=0) < 0:
        raise NotSupportedError(f"Tile node '{g.prefix}': training through Tile needs static shapes and repeats")
    split = interleaved(shape, [int(r) for r in repeats])
    view = g.emit("Reshape", [g.dy, _const(g, np.array(split, np.int64), "split")],
                  [Value("", split, g.value(x).dtype)])[0]
    return [_sum(g, view, list(range(0, 2 * len(shape), 2)), keep_dims=False)]


@bprop("Gather", wrt=(0,))
def gather(g: Bprop) -> Grads:
    """A scatter-add of dy along the axis: dy with the index dims flattened into one, and the indices spread
    over it, are a ScatterElements of the same rank as x (static index shapes)."""
    x, indices = g.node.inputs
    if not g.needs(0):
        return []
    rank, index_shape = g.value(x).rank, g.value(indices).shape
    axis = int(g.node.attrs.get("axis", 0)) % rank
    dy_shape = g.value(g.dy).shape
    if min(index_shape + dy_shape, default=0) < 0:
        raise NotSupportedError(f"Gather node '{g.prefix}': training through Gather needs static shapes")
    count = int(np.prod(index_shape, dtype=np.int64))
    flat = dy_shape[:axis] + (count,) + dy_shape[axis + len(index_shape):]
    dy = g.emit("Reshape", [g.dy, _const(g, np.array(flat, np.int64), "flat_shape")],
                [Value("", flat, g.value(g.dy).dtype)])[0]
    line = (1,) * axis + (count,) + (1,) * (rank - axis - 1)
    as_int64 = g.emit("Cast", [indices], [Value("", index_shape, np.dtype(np.int64))], to=dtypes.DataType.INT64)[0]
    spread = g.emit("Reshape", [as_int64, _const(g, np.array(line, np.int64), "index_line")],
                    [Value("", line, np.dtype(np.int64))])[0]
    spread = g.emit("Expand", [spread, _const(g, np.array(flat, np.int64), "index_shape")],
                    [Value("", flat, np.dtype(np.int64))])[0]
    return [g.grad("ScatterElements", [_zeros_like(g, x), spread, dy], 0, reduction=R.ADD)]


@bprop("GatherElements", wrt=(0,))
def gather_elements(g: Bprop) -> Grads:
    x, indices = g.node.inputs
    if not g.needs(0):
        return []
    return [g.grad("ScatterElements", [_zeros_like(g, x), indices, g.dy], 0, reduction=R.ADD)]


@bprop("GatherND", wrt=(0,))
def gather_nd(g: Bprop) -> Grads:
    """A scatter-add of dy at the gathered coordinates; batch_dims become leading coordinates of the indices."""
    x, indices = g.node.inputs
    if not g.needs(0):
        return []
    b = int(g.node.attrs.get("batch_dims", 0))
    if b:
        indices = _with_batch_coordinates(g, indices, b)
    return [g.grad("ScatterND", [_zeros_like(g, x), indices, g.dy], 0, reduction=R.ADD)]


def _with_batch_coordinates(g: Bprop, indices: str, b: int) -> str:
    """indices [B1..Bb, ..., k] with each entry's b batch coordinates put before its k coordinates (int64)."""
    shape = g.value(indices).shape
    if min(shape, default=0) < 0:
        raise NotSupportedError(f"GatherND node '{g.prefix}': training with batch_dims needs static index shapes")
    grid = np.indices(shape[:-1], np.int64)[:b]                       # [b, *shape[:-1]]
    coords = _const(g, np.ascontiguousarray(np.moveaxis(grid, 0, -1)), "batch_coordinates")
    as_int64 = g.emit("Cast", [indices], [Value("", shape, np.dtype(np.int64))], to=dtypes.DataType.INT64)[0]
    full = Value("", shape[:-1] + (shape[-1] + b,), np.dtype(np.int64))
    return g.emit("Concat", [coords, as_int64], [full], axis=len(shape) - 1)[0]


@bprop("ScatterElements", "ScatterND", wrt=(0, 2))
def scatter(g: Bprop) -> Grads:
    """No reduction: data's gradient is dy with the written entries zeroed; add: dy itself. The updates'
    gradient is dy gathered at the indices. Products and extremes are not differentiated."""
    data, indices, updates = g.node.inputs
    reduction = int(g.node.attrs.get("reduction", R.NONE))
    if reduction not in (R.NONE, R.ADD):
        raise NotSupportedError(f"{g.node.op} node '{g.prefix}': only scatters without a reduction or with add can "
                                f"be trained through")
    gather = "GatherElements" if g.node.op == "ScatterElements" else "GatherND"
    out: Grads = [None, None, None]
    if g.needs(0):
        out[0] = g.dy if reduction == R.ADD else g.grad(g.node.op, [g.dy, indices, _zeros_like(g, updates)], 0)
    if g.needs(2):
        out[2] = g.grad(gather, [g.dy, indices], 2)
    return out
