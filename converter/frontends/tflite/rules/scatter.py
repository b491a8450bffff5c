"""TFLite importer rules that write values into a fresh tensor: SCATTER_ND, SPARSE_TO_DENSE,
SEGMENT_SUM, UNSORTED_SEGMENT_SUM / MAX / MIN / PROD -> ScatterND onto a filled tensor (ConstantOfShape or Expand of the
default); MATRIX_DIAG, MATRIX_SET_DIAG -> Where with an identity mask.

SCATTER_ND sums updates that hit one cell (TF's rule), so it is a ScatterND ADD onto zeros. A segment that no
id names keeps the reduction's identity, as TFLite fills it: 0, the dtype's lowest (MAX), highest (MIN), 1 (PROD).
"""
from __future__ import annotations

import numpy as np

from converter.frontends.tflite.registry import ImportContext, tflite_op
from schema import fb

S = fb.ScatterReduction
_SEGMENT = {"UNSORTED_SEGMENT_SUM": S.ADD, "UNSORTED_SEGMENT_MAX": S.MAX, "UNSORTED_SEGMENT_MIN": S.MIN,
            "UNSORTED_SEGMENT_PROD": S.MUL}


def _int64(ctx: ImportContext, values: list[int], hint: str) -> str:
    return ctx.add_const(np.array(values, np.int64), hint)


def _filled(ctx: ImportContext, shape: list[int], value: float | str, dtype: np.dtype) -> str:
    """A tensor of `shape` holding `value` (a number, or the name of a scalar value)."""
    if isinstance(value, str):
        scalar = ctx.emit1("Reshape", [value, _int64(ctx, [], "scalar")])
        return ctx.emit1("Expand", [scalar, _int64(ctx, shape, "shape")])
    return ctx.add_const(np.full(shape, value, dtype), "filled")


def _identity(reduction: int, dtype: np.dtype) -> float:
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return {S.ADD: 0, S.MUL: 1, S.MAX: info.min, S.MIN: info.max}[reduction]


@tflite_op("SCATTER_ND")
def scatter_nd(ctx: ImportContext) -> None:
    """Inputs: indices [..., k], updates, shape."""
    indices, updates = ctx.input(0), ctx.input(1)
    shape = ctx.int_list(ctx.input(2), "shape")
    zeros = _filled(ctx, shape, 0, ctx.value(updates).dtype)
    ctx.emit("ScatterND", [zeros, indices, updates], ctx.outputs, reduction=S.ADD)


@tflite_op("SPARSE_TO_DENSE")
def sparse_to_dense(ctx: ImportContext) -> None:
    """Inputs: indices ([n] or [n, k]), output_shape, values ([n] or a scalar), default_value."""
    indices, values, default = ctx.input(0), ctx.input(2), ctx.input(3)
    shape = ctx.int_list(ctx.input(1), "output_shape")
    if ctx.value(indices).rank < 2:
        indices = ctx.emit1("Reshape", [indices, _int64(ctx, [-1, 1], "shape")])
    count = ctx.value(indices).shape[0]
    if ctx.value(values).rank == 0 or ctx.value(values).shape == (1,):
        values = ctx.emit1("Expand", [ctx.emit1("Reshape", [values, _int64(ctx, [], "scalar")]),
                                      _int64(ctx, [count], "count")])
    ctx.emit("ScatterND", [_filled(ctx, shape, default, ctx.value(values).dtype), indices, values], ctx.outputs,
             reduction=S.NONE)


@tflite_op("SEGMENT_SUM", *_SEGMENT)
def unsorted_segment(ctx: ImportContext) -> None:
    """Inputs: data, segment_ids (data's leading dims), num_segments -> [num_segments, data dims after the ids'].
    SEGMENT_SUM has sorted ids and max(ids) + 1 segments, so its ids must be constant."""
    data, ids = ctx.input(0), ctx.input(1)
    if ctx.op.op == "SEGMENT_SUM":
        segments = max(ctx.int_list(ids, "segment_ids"), default=-1) + 1
    else:
        segments = ctx.int_list(ctx.input(2), "num_segments")[0]
    value = ctx.value(data)
    reduction = _SEGMENT.get(ctx.op.op, S.ADD)
    start = _filled(ctx, [segments, *value.shape[ctx.value(ids).rank:]], _identity(reduction, value.dtype),
                    value.dtype)
    index = ctx.emit1("Unsqueeze", [ids, _int64(ctx, [-1], "axes")])
    ctx.emit("ScatterND", [start, index, data], ctx.outputs, reduction=reduction)


def _diagonal_mask(ctx: ImportContext, rows: int, cols: int) -> str:
    return ctx.add_const(np.eye(rows, cols, dtype=np.bool_), "diagonal")


@tflite_op("MATRIX_DIAG")
def matrix_diag(ctx: ImportContext) -> None:
    """[..., n] -> [..., n, n] with the values on the diagonal, zeros elsewhere."""
    x = ctx.input(0)
    n = ctx.value(x).shape[-1]
    column = ctx.emit1("Unsqueeze", [x, _int64(ctx, [-1], "axes")])
    zero = ctx.add_const(np.zeros((), ctx.value(x).dtype), "zero")
    ctx.emit("Where", [_diagonal_mask(ctx, n, n), column, zero], ctx.outputs)


@tflite_op("MATRIX_SET_DIAG")
def matrix_set_diag(ctx: ImportContext) -> None:
    """Inputs: x [..., m, n], diagonal [..., min(m, n)]: diagonal[i] goes to (i, i), broadcast along the axis
    that has min(m, n) entries."""
    x, diagonal = ctx.input(0), ctx.input(1)
    m, n = ctx.value(x).shape[-2:]
    spread = ctx.emit1("Unsqueeze", [diagonal, _int64(ctx, [-1 if m <= n else -2], "axes")])
    ctx.emit("Where", [_diagonal_mask(ctx, m, n), spread, x], ctx.outputs)
