"""Row reductions and small row products of float32, written as vector IR.

`row_sum`, `row_max` and `row_range`: LLVM keeps float adds and compares in their written order, so a running sum or
max in numba code (even as eight interleaved scalars) stays a chain of scalar instructions. Here two accumulators of
LANES lanes run over the row, then fold pairwise by halves, then the tail (len % 2 * LANES values) is added in
order: a fixed order for a given length and vector width. On all-MiniLM-L6-v2's attention rows (128 keys) the
softmax pass's max and sum were most of its time.

`rows_times`: up to four rows times a matrix, in register blocks; a numba loop over a 32-long row (an attention
head) ran mostly its scalar remainder, the length not being known to fill its unrolled vector loop."""
from __future__ import annotations

from lite.kernels.compiled.llvm import F32, I32, I64, LANES, cgutils, intrinsic, ir, splat, types


def _row_folds(context, builder, signature, args, folds):
    """The IR of folds of a C-contiguous float32 row in one pass over it, one value each: per fold
    `(combine, start)`, `combine(builder, a, b)` on vectors and scalars alike, accumulators starting at `start`."""
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    vector = ir.VectorType(F32, LANES)
    proxy = cgutils.create_struct_proxy(signature.args[0])(context, builder, value=args[0])
    base, n = builder.ptrtoint(proxy.data, I64), builder.extract_value(proxy.shape, 0)
    accs = [[cgutils.alloca_once_value(builder, ir.Constant(vector, [start] * LANES)) for _ in range(2)]
            for _, start in folds]
    whole = builder.udiv(n, const(2 * LANES))
    with cgutils.for_range(builder, whole) as loop:
        at = builder.add(base, builder.mul(loop.index, const(8 * LANES)))
        for half in range(2):
            v = builder.load(builder.inttoptr(builder.add(at, const(4 * LANES * half)), vector.as_pointer()), align=4)
            for (combine, _), pair in zip(folds, accs):
                builder.store(combine(builder, builder.load(pair[half]), v), pair[half])
    done = builder.mul(whole, const(2 * LANES))
    totals = []
    for (combine, _), pair in zip(folds, accs):
        folded, width = combine(builder, builder.load(pair[0]), builder.load(pair[1])), LANES
        while width > 1:                                                    # halves: lanes k and k + width / 2
            width //= 2
            halves = [builder.shuffle_vector(folded, ir.Constant(folded.type, None),
                                             ir.Constant(ir.VectorType(I32, width), list(range(at, at + width))))
                      for at in (0, width)]
            folded = combine(builder, *halves)
        totals.append(cgutils.alloca_once_value(builder, builder.extract_element(folded, ir.Constant(I32, 0))))
    with cgutils.for_range(builder, builder.sub(n, done)) as loop:
        at = builder.add(base, builder.mul(builder.add(done, loop.index), const(4)))
        value = builder.load(builder.inttoptr(at, F32.as_pointer()))
        for (combine, _), total in zip(folds, totals):
            builder.store(combine(builder, builder.load(total), value), total)
    return [builder.load(total) for total in totals]


def _is_row(row) -> bool:
    return isinstance(row, types.Array) and row.ndim == 1 and row.layout == "C" and row.dtype == types.float32


def _add(b, x, y):
    return b.fadd(x, y)


def _larger(b, x, y):                           # y where y > x: a NaN y is passed over
    return b.select(b.fcmp_ordered(">", y, x), y, x)


def _smaller(b, x, y):
    return b.select(b.fcmp_ordered("<", y, x), y, x)


@intrinsic
def row_sum(typingctx, row):
    """The sum of a contiguous float32 row (0 when empty)."""
    if not _is_row(row):
        return None
    return types.float32(row), lambda context, builder, signature, args: _row_folds(
        context, builder, signature, args, [(_add, 0.0)])[0]


@intrinsic
def row_max(typingctx, row):
    """The largest value of a contiguous float32 row, NaNs passed over (-inf when empty or all NaN)."""
    if not _is_row(row):
        return None
    return types.float32(row), lambda context, builder, signature, args: _row_folds(
        context, builder, signature, args, [(_larger, float("-inf"))])[0]


@intrinsic
def row_range(typingctx, row):
    """(min(row, 0), max(row, 0)) of a contiguous float32 row in one pass, NaNs passed over (numba's min and max
    do not vectorise: eight scalar running pairs took 0.22 ms on 512 x 1536 rows, this 0.034 ms)."""
    if not _is_row(row):
        return None

    def code(context, builder, signature, args):
        low, high = _row_folds(context, builder, signature, args, [(_smaller, 0.0), (_larger, 0.0)])
        return context.make_tuple(builder, signature.return_type, [low, high])
    return types.UniTuple(types.float32, 2)(row), code


@intrinsic
def muladd(typingctx, a, b, c):
    """a * b + c in float32, fused where the target has a fast FMA (llvm.fmuladd: x86-64-v3 and up, aarch64),
    else a multiply and an add; numba alone never fuses them."""
    def code(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(F32, [F32] * 3), "llvm.fmuladd.f32")
        return builder.call(fn, args)
    return types.float32(types.float32, types.float32, types.float32), code


@intrinsic
def rows_times(typingctx, x, m, out):
    """out = x @ m for float32 x [R, N] (R <= 4), m [N, C] and out [R, C], any strides (views of a head in a
    [B, S, H * D] tensor need no copy): register blocks of R rows by two vectors of LANES columns (then one
    vector, then one column at a time) where the rows of m and out are contiguous, so each vector of m loaded
    serves R rows; every sum runs over the N rows in order, in multiply-adds (fused where the target has them)."""
    if not all(isinstance(a, types.Array) and a.ndim == 2 and a.dtype == types.float32 for a in (x, m, out)):
        return None
    return types.none(x, m, out), _rows_times_code


def _rows_times_code(context, builder, signature, args):
    const = lambda v: ir.Constant(I64, v)                                   # noqa: E731
    vector = ir.VectorType(F32, LANES)
    (xs, x_shape, x_steps), (ms, m_shape, m_steps), (outs, _, out_steps) = (
        (builder.ptrtoint(p.data, I64), p.shape, [builder.extract_value(p.strides, k) for k in range(2)])
        for p in (cgutils.create_struct_proxy(t)(context, builder, value=a) for t, a in zip(signature.args, args)))
    rows, n, columns = builder.extract_value(x_shape, 0), builder.extract_value(m_shape, 0), \
        builder.extract_value(m_shape, 1)
    muladd = {t: cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t] * 3), f"llvm.fmuladd.{name}")
              for t, name in ((vector, f"v{LANES}f32"), (F32, "f32"))}
    accs = [[cgutils.alloca_once(builder, vector) for _ in range(2)] for _ in range(4)]          # [row][vector]
    ones = [cgutils.alloca_once(builder, F32) for _ in range(4)]

    def at(base, row, steps, column):           # the address of [row, column] (byte strides `steps`)
        return builder.add(builder.add(base, builder.mul(row, steps[0])), builder.mul(column, steps[1]))

    def block(height, column, count):           # out[:height, column : column + count * LANES]
        for row in accs[:height]:
            for acc in row[:count]:
                builder.store(ir.Constant(vector, [0.0] * LANES), acc)
        with cgutils.for_range(builder, n) as loop:
            m_at = at(ms, loop.index, m_steps, column)
            vs = [builder.load(builder.inttoptr(builder.add(m_at, const(4 * LANES * k)), vector.as_pointer()),
                               align=4) for k in range(count)]
            for r in range(height):
                w = builder.load(builder.inttoptr(at(xs, const(r), x_steps, loop.index), F32.as_pointer()))
                w = splat(builder, w, vector)
                for k in range(count):
                    builder.store(builder.call(muladd[vector], [w, vs[k], builder.load(accs[r][k])]), accs[r][k])
        for r in range(height):
            for k in range(count):
                to = builder.add(at(outs, const(r), out_steps, column), const(4 * LANES * k))
                builder.store(builder.load(accs[r][k]), builder.inttoptr(to, vector.as_pointer()), align=4)

    def column_at(height, column):              # out[:height, column], one column at a time
        for one in ones[:height]:
            builder.store(ir.Constant(F32, 0.0), one)
        with cgutils.for_range(builder, n) as loop:
            v = builder.load(builder.inttoptr(at(ms, loop.index, m_steps, column), F32.as_pointer()))
            for r in range(height):
                w = builder.load(builder.inttoptr(at(xs, const(r), x_steps, loop.index), F32.as_pointer()))
                builder.store(builder.call(muladd[F32], [w, v, builder.load(ones[r])]), ones[r])
        for r in range(height):
            builder.store(builder.load(ones[r]),
                          builder.inttoptr(at(outs, const(r), out_steps, column), F32.as_pointer()))

    rows_contiguous = builder.and_(builder.icmp_unsigned("==", m_steps[1], const(4)),
                                   builder.icmp_unsigned("==", out_steps[1], const(4)))
    for height in range(1, 5):
        with builder.if_then(builder.icmp_unsigned("==", rows, const(height))):
            pairs = builder.select(rows_contiguous, builder.udiv(columns, const(2 * LANES)), const(0))
            with cgutils.for_range(builder, pairs) as loop:
                block(height, builder.mul(loop.index, const(2 * LANES)), 2)
            done = builder.mul(pairs, const(2 * LANES))
            single = builder.and_(rows_contiguous,
                                  builder.icmp_unsigned(">=", builder.sub(columns, done), const(LANES)))
            with builder.if_then(single):
                block(height, done, 1)
            done = builder.select(single, builder.add(done, const(LANES)), done)
            with cgutils.for_range(builder, builder.sub(columns, done)) as loop:
                column_at(height, builder.add(done, loop.index))
    return context.get_dummy_value()
