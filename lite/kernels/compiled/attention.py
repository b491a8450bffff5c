"""The compiled sibling of Attention (inference, one output y, no past cache, softcap or float64 softmax): one
threaded pass over the (batch, head) pairs (`attention_rows`). Each block of four query rows is multiplied by the
head's K^T, scaled, biased and softmaxed while its scores are four rows of T values in cache, then multiplied by
V straight into y: no [B, H, S, T] scores tensor, and both products threaded with the rest. Before, numpy's
batched matmuls ran as one small BLAS call per head, mostly on one thread (all-MiniLM-L6-v2 at batch 8, heads
[8, 12, 128, 32], one thread: Q K^T 1.4 ms, the softmax pass 1.3 ms, P V 1.6 ms); in a 2-thread session the six
Attention nodes took 22-26 ms a run, 12-13 ms as this pass (2.7 -> 1.4-1.7 ms at batch 1). The products are
vector IR (`vector_reduce.rows_times`) over views of the heads: q, v and y are read and written in place in their
[B, S, H * D] or [B, H, S, D] layouts; only K is transposed, per head.

Rows whose bias masks every key get zero probabilities (y = 0), as in the numpy kernel; the sums run in another
order, so results agree within float32 rounding."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.attention import _FLOAT64, AttentionKernel, attention_bias
from lite.kernels.compiled import Compiled, CompiledCall
from lite.kernels.compiled.llvm import prange
from lite.kernels.compiled.vector_exp import EXP_MIN, exp32
from lite.kernels.compiled.vector_reduce import row_max, row_sum, rows_times

F32 = np.dtype(np.float32)


def rows_of(x: np.ndarray, heads: int, length: int) -> list[int]:
    """Where head h's row i of batch b sits in `as_rows(x)` for a [B, S, H * D] or [B, H, S, D] tensor x: row
    b * r_b + h * r_h + i * r_i, from column h * c_h (`attention_rows`' layout)."""
    return [length, 0, 1, x.shape[2] // heads] if x.ndim == 3 else [heads * length, length, 1, 0]


def as_rows(x: np.ndarray) -> np.ndarray:
    """x's rows as a 2-D view (its last axis kept); raises rather than copy."""
    view = x.view()
    view.shape = (-1, x.shape[-1])
    return view


@Compiled
def attention_rows(q, k, v, layout, scale, bias, group, y):  # pragma: no cover
    """y = softmax(scale * q k^T + bias) v for every batch b and query head h, one task per (b, h), four query
    rows at a time.

    q, k, v, y are 2-D C arrays of rows: head h's row i of batch b is q[r, c : c + D] with r = b * layout[0, 0]
    + h * layout[0, 1] + i * layout[0, 2], c = h * layout[0, 3] (k, v: layout[1], layout[2], with the key/value
    head h // group; y: layout[3]), which serves both [B, S, H * D] and [B, H, S, D] tensors without a copy;
    layout[4] = B, H, S, T and layout[5] = D, Dv. bias [1 or B, 1 or H, 1 or S, T] broadcasts; a row whose every
    value is -inf gives y = 0."""
    batch, heads, queries, keys = layout[4, 0], layout[4, 1], layout[4, 2], layout[4, 3]
    depth, width = layout[5, 0], layout[5, 1]
    for task in prange(batch * heads):
        b, h = task // heads, task % heads
        kv = h // group
        kt = np.empty((depth, keys), np.float32)             # this head's K^T, contiguous
        for j in range(keys):
            row, col = b * layout[1, 0] + kv * layout[1, 1] + j * layout[1, 2], kv * layout[1, 3]
            for d in range(depth):
                kt[d, j] = k[row, col + d]
        row, col = b * layout[2, 0] + kv * layout[2, 1], kv * layout[2, 3]
        vh = v[row:row + keys * layout[2, 2]:layout[2, 2], col:col + width]
        s, p = np.empty((4, keys), np.float32), np.empty((4, keys), np.float32)      # scores, probabilities
        bias_rows = bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0]
        for i in range(0, queries, 4):
            height = min(4, queries - i)
            row, col = b * layout[0, 0] + h * layout[0, 1] + i * layout[0, 2], h * layout[0, 3]
            rows_times(q[row:row + height * layout[0, 2]:layout[0, 2], col:col + depth], kt, s[:height])
            for r in range(height):
                add, x, e = bias_rows[i + r if bias_rows.shape[0] > 1 else 0], s[r], p[r]
                for j in range(keys):
                    x[j] = x[j] * scale + add[j]
                peak = row_max(x)
                if peak == -np.inf:
                    e[:] = 0.0
                    continue
                for j in range(keys):
                    shifted = x[j] - peak
                    # below exp32's range (a masked key) 0, as numpy's exp underflows: exp32(EXP_MIN) / total is
                    # a denormal, slow in the division and in the product with V (MiniLM's padded keys)
                    e[j] = exp32(shifted) if not shifted < EXP_MIN else np.float32(0.0)     # NaN stays NaN
                total = row_sum(e)
                for j in range(keys):
                    e[j] /= total
            row, col = b * layout[3, 0] + h * layout[3, 1] + i * layout[3, 2], h * layout[3, 3]
            rows_times(p[:height], vh, y[row:row + height * layout[3, 2]:layout[3, 2], col:col + width])


@register("Attention", DataType.FLOAT32, backend="compiled")
class AttentionCompiled(CompiledCall, AttentionKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        a, n = self.attrs, self.shapes
        extra = [s for s in inputs[4:] if s is not None]            # past cache, nonpad lengths
        self.compiled = (not a.training and len(self.node.outputs) == 1 and not extra and a.softcap <= 0
                         and a.softmax_precision != _FLOAT64 and min(n.b, n.s, n.t, n.d, n.dv) > 0
                         and all(s.dtype == F32 for s in inputs[:3]))

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        n = self.shapes
        self.mask = inputs[3] if len(inputs) > 3 else None
        tensors = [(inputs[0], n.hq, n.s), (inputs[1], n.hkv, n.t), (inputs[2], n.hkv, n.t),
                   (outputs[0], n.hq, n.s)]
        layout = np.array([rows_of(x, heads, length) for x, heads, length in tensors]
                          + [[n.b, n.hq, n.s, n.t], [n.d, n.dv, 0, 0]], np.int64)
        self.args = [*(as_rows(x) for x, _, _ in tensors[:3]), layout, np.float32(n.scale), self.bias4(),
                     np.int64(n.hq // n.hkv), as_rows(outputs[0])]
        self.pass_call = attention_rows.entry(n.b * n.hq * n.s * n.t * (n.d + n.dv), *self.args)
        return self.attend

    def bias4(self) -> np.ndarray:
        """The additive bias from the mask's current values, a contiguous 4-D float32 array (zeros [1, 1, 1, T]
        when nothing is masked)."""
        n, a = self.shapes, self.attrs
        bias = attention_bias(self.mask, None, n.s, n.t, n.p, a.is_causal, a.left_window_size, a.right_window_size)
        return np.zeros((1, 1, 1, n.t), F32) if bias is None else np.ascontiguousarray(bias, F32)

    def attend(self) -> None:
        if not self.mask_static:
            self.args[5] = self.bias4()
        self.pass_call(*self.args)
