"""The compiled sibling of Attention (inference, one output y, no past cache, softcap or float64 softmax): the two
products stay numpy's batched matmuls over the grouped head views (BLAS: on all-MiniLM-L6-v2's [16, 12, 32, 32]
heads 0.26 + 0.14 ms, against 0.85 ms for Q K^T alone as compiled loops, whose 32-long inner loops cost more to
enter than to run), and everything between them is one compiled pass (`softmax_scores`): scale, bias, softmax,
written into a second buffer, instead of numpy's seven passes over the [B, H, S, T] scores.

Rows whose bias masks every key get zero probabilities (y = 0), as in the numpy kernel; the sums run in another
order, so results agree within float32 rounding."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.attention import _FLOAT64, AttentionKernel, attention_bias, grouped
from lite.kernels.compiled import Compiled, CompiledCall
from lite.kernels.compiled.llvm import prange
from lite.kernels.compiled.vector_exp import EXP_MIN, exp32
from lite.kernels.compiled.vector_reduce import row_max, row_sum

F32 = np.dtype(np.float32)


@Compiled
def softmax_scores(scores, scale, bias, out):  # pragma: no cover
    """out[b, h, i] = softmax(scores[b, h, i] * scale + bias[b, h, i]) for scores, out [B, H, S, T] (distinct) and
    bias [1 or B, 1 or H, 1 or S, T] broadcast; a row whose every value is -inf is 0."""
    batch, heads, queries, keys = scores.shape
    for task in prange(batch * heads):
        b, h = task // heads, task % heads
        bias_rows = bias[b if bias.shape[0] > 1 else 0, h if bias.shape[1] > 1 else 0]
        for i in range(queries):
            x, y, add = scores[b, h, i], out[b, h, i], bias_rows[i if bias_rows.shape[0] > 1 else 0]
            for j in range(keys):
                y[j] = x[j] * scale + add[j]
            peak = row_max(y)
            if peak == -np.inf:
                y[:] = 0.0
                continue
            for j in range(keys):
                shifted = y[j] - peak
                # below exp32's range (a masked key) 0, as numpy's exp underflows: exp32(EXP_MIN) / total is a
                # denormal, slow in the division and in the product with V (MiniLM's padded keys)
                y[j] = exp32(shifted) if not shifted < EXP_MIN else np.float32(0.0)     # NaN stays NaN
            total = row_sum(y)
            for j in range(keys):
                y[j] /= total


@register("Attention", DataType.FLOAT32, backend="compiled")
class AttentionCompiled(CompiledCall, AttentionKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        a, n = self.attrs, self.shapes
        extra = [s for s in inputs[4:] if s is not None]            # past cache, nonpad lengths
        self.compiled = (not a.training and len(self.node.outputs) == 1 and not extra and a.softcap <= 0
                         and a.softmax_precision != _FLOAT64 and min(n.b, n.s, n.t, n.d, n.dv) > 0
                         and all(s.dtype == F32 for s in inputs[:3]))

    def call_scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.shapes.probs_shape, F32)] * 2

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        n = self.shapes
        AttentionKernel.bind(self, inputs, outputs, scratch[:1])      # the grouped views of q, k^T, v, y
        self.mask = inputs[3] if len(inputs) > 3 else None
        self.probs = grouped(scratch[1], n.hkv)
        self.args = [scratch[0], np.float32(n.scale), self.bias4(), scratch[1]]
        self.pass_call = softmax_scores.entry(scratch[0].size * 16, *self.args)
        return self.attend

    def bias4(self) -> np.ndarray:
        """The additive bias from the mask's current values, a contiguous 4-D float32 array (zeros [1, 1, 1, T]
        when nothing is masked)."""
        n, a = self.shapes, self.attrs
        bias = attention_bias(self.mask, None, n.s, n.t, n.p, a.is_causal, a.left_window_size, a.right_window_size)
        return np.zeros((1, 1, 1, n.t), F32) if bias is None else np.ascontiguousarray(bias, F32)

    def attend(self) -> None:
        if not self.mask_static:
            self.args[2] = self.bias4()
        np.matmul(self.q, self.k_t, out=self.scores)
        self.pass_call(*self.args)
        np.matmul(self.probs, self.v, out=self.y)
