"""What the compiled GEMMs (`int8`, `gemm`) share: array addresses and vector splats for their LLVM IR register
tiles, and the split of an [M, N] output into tasks of whole row tiles times column spans."""
from __future__ import annotations

from llvmlite import ir
from numba import njit
from numba.core import cgutils

MR, NR = 6, 16                        # register tile: rows x columns (two 8-lane vectors per row)
I32, I64 = ir.IntType(32), ir.IntType(64)


def address(context, builder, array_type, array):
    """(data address as i64, strides) of a numba array value."""
    proxy = cgutils.create_struct_proxy(array_type)(context, builder, value=array)
    return builder.ptrtoint(proxy.data, I64), proxy.strides


def splat(builder, value, vector):
    one = builder.insert_element(ir.Constant(vector, None), value, ir.Constant(I32, 0))
    return builder.shuffle_vector(one, ir.Constant(vector, None), ir.Constant(ir.VectorType(I32, vector.count),
                                                                              [0] * vector.count))


def tasks(rows: int, cols: int) -> tuple[int, int]:
    """(rows per task, column spans) for `gemm_requantize`: chunks of about 8 tiles (the int16 rows of one stay
    in L1 beside a weight block), and for short M the columns cut too, so that there are at least 8 tasks."""
    chunks = max(1, -(-rows // (8 * MR)))
    chunk = -(-(-(-rows // chunks)) // MR) * MR
    spans = max(1, min(-(-cols // NR), -(-8 // chunks)))
    return chunk, spans


@njit(cache=True, nogil=True)
def task_rows(task, rows, blocks, chunk, spans):  # pragma: no cover
    """(first row, row count, first column block, end block) of task `task` of `tasks`' split."""
    per_span = (blocks + spans - 1) // spans
    m0 = task // spans * chunk
    b0 = task % spans * per_span
    return m0, min(chunk, rows - m0), b0, min(blocks, b0 + per_span)
