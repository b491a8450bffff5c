"""The sum and the largest value of a contiguous float32 row, written as vector IR: LLVM keeps float adds and
compares in their written order, so a running sum or max in numba code (even as eight interleaved scalars) stays a
chain of scalar instructions. Here two accumulators of LANES lanes run over the row, then fold pairwise by halves,
then the tail (len % 2 * LANES values) is added in order: a fixed order for a given length and vector width.

On all-MiniLM-L6-v2's attention rows (128 keys) the softmax pass's max and sum were most of its time."""
from __future__ import annotations

from lite.kernels.compiled.llvm import F32, I32, I64, LANES, cgutils, intrinsic, ir, types


def _row_fold(context, builder, signature, args, combine, start):
    """The IR of a fold of a C-contiguous float32 row: `combine(builder, a, b)` on vectors and scalars alike,
    accumulators starting at `start`."""
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    vector = ir.VectorType(F32, LANES)
    proxy = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
    base, n = builder.ptrtoint(proxy.data, I64), builder.extract_value(proxy.shape, 0)
    accs = [cgutils.alloca_once_value(builder, ir.Constant(vector, [start] * LANES)) for _ in range(2)]
    whole = builder.udiv(n, const(2 * LANES))
    with cgutils.for_range(builder, whole) as loop:
        at = builder.add(base, builder.mul(loop.index, const(8 * LANES)))
        for half, acc in enumerate(accs):
            v = builder.load(builder.inttoptr(builder.add(at, const(4 * LANES * half)), vector.as_pointer()), align=4)
            builder.store(combine(builder, builder.load(acc), v), acc)
    folded, width = combine(builder, builder.load(accs[0]), builder.load(accs[1])), LANES
    while width > 1:                                                        # halves: lanes k and k + width / 2
        width //= 2
        halves = [builder.shuffle_vector(folded, ir.Constant(folded.type, None),
                                         ir.Constant(ir.VectorType(I32, width), list(range(at, at + width))))
                  for at in (0, width)]
        folded = combine(builder, *halves)
    total = cgutils.alloca_once_value(builder, builder.extract_element(folded, ir.Constant(I32, 0)))
    done = builder.mul(whole, const(2 * LANES))
    with cgutils.for_range(builder, builder.sub(n, done)) as loop:
        at = builder.add(base, builder.mul(builder.add(done, loop.index), const(4)))
        builder.store(combine(builder, builder.load(total), builder.load(builder.inttoptr(at, F32.as_pointer()))),
                      total)
    return builder.load(total)


def _is_row(row) -> bool:
    return isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C" and row.dtype == types.float32


@intrinsic
def row_sum(typingctx, row):
    """The sum of a contiguous float32 row (0 when empty)."""
    if not _is_row(row):
        return None
    return types.float32(row), lambda context, builder, signature, args: _row_fold(
        context, builder, signature, args, lambda b, x, y: b.fadd(x, y), 0.0)


@intrinsic
def row_max(typingctx, row):
    """The largest value of a contiguous float32 row, NaNs passed over (-inf when empty or all NaN)."""
    if not _is_row(row):
        return None
    return types.float32(row), lambda context, builder, signature, args: _row_fold(
        context, builder, signature, args, lambda b, x, y: b.select(b.fcmp_ordered(">", y, x), y, x), float("-inf"))

