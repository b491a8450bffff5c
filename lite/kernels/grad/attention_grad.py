"""AttentionGrad: the gradients of Attention from its saved probabilities P (the training forward's output).

With S = scale * Q K^T (softcapped: C = c * tanh(S / c)) and Y = P V, P = softmax(C + bias):
    dV = P^T dY,   dP = dY V^T,   dC = P * (dP - rowsum(dP * P)),   dS = dC * (1 - (C / c)^2),
    dQ = scale * dS K,   dK = scale * dS^T Q.
Masked entries have P = 0 and so no gradient. In the grouped views of the forward ([B, Hkv, G, S, D] for the
query side), the key/value gradients sum over the G query heads sharing each key/value head.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.attention import AttentionShapes, grouped, split_heads


@register("AttentionGrad", DataType.FLOAT32)
class AttentionGradKernel(Kernel):
    """inputs: dy, q, k, v, probs -> dq, dk, dv (shaped like q, k, v)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, q, k, v, probs = inputs[:5]
        self.shapes = n = AttentionShapes(self, q, k, v)
        if dy.shape != n.y_shape or probs.shape != n.probs_shape:
            raise self.error(f"dy {list(dy.shape)} and probs {list(probs.shape)} must be {list(n.y_shape)} and "
                             f"{list(n.probs_shape)}")
        if len(self.node.outputs) != 3:
            raise self.error(f"has outputs dq, dk, dv, not {len(self.node.outputs)}")
        return [TensorSpec(x.shape, dy.dtype) for x in (q, k, v)]

    def scratch(self) -> list[TensorSpec]:
        n, f32 = self.shapes, np.dtype(np.float32)
        group = n.hq // n.hkv
        per_head = [TensorSpec((n.b, n.hkv, group, n.t, max(n.d, n.dv)), f32)] if group > 1 else []
        return [TensorSpec(n.probs_shape, f32), TensorSpec(n.probs_shape, f32)] + per_head

    def bind(self, inputs, outputs, scratch) -> None:
        n = self.shapes
        g = lambda x, heads: grouped(split_heads(x, heads), n.hkv)        # noqa: E731
        self.dy, self.q, self.dq, self.p = g(inputs[0], n.hq), g(inputs[1], n.hq), g(outputs[0], n.hq), \
            grouped(inputs[4], n.hkv)
        self.k, self.v, self.dk, self.dv = (g(x, n.hkv) for x in (inputs[2], inputs[3], outputs[1],
                                                                           outputs[2]))
        self.dp, self.ds = (grouped(s, n.hkv) for s in scratch[:2])
        self.per_head = scratch[2] if len(scratch) > 2 else None

    def _kv_grad(self, left: np.ndarray, right: np.ndarray, out: np.ndarray, width: int) -> None:
        """out [B, Hkv, 1, T, w] = sum over the group of left^T @ right (one matmul, then a sum when G > 1)."""
        if self.per_head is None:
            np.matmul(left.swapaxes(-1, -2), right, out=out)
            return
        tmp = self.per_head[..., :width]
        np.matmul(left.swapaxes(-1, -2), right, out=tmp)
        np.sum(tmp, axis=2, keepdims=True, out=out)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        n, a, p, dp, ds = self.shapes, self.attrs, self.p, self.dp, self.ds
        self._kv_grad(p, self.dy, self.dv, n.dv)
        np.matmul(self.dy, self.v.swapaxes(-1, -2), out=dp)
        np.multiply(dp, p, out=ds)
        dp -= ds.sum(axis=-1, keepdims=True)
        np.multiply(dp, p, out=ds)
        if a.softcap > 0:        # d(c tanh(s / c)) / ds = 1 - tanh^2, with the scores recomputed
            np.matmul(self.q, self.k.swapaxes(-1, -2), out=dp)
            dp *= n.scale / a.softcap
            np.tanh(dp, out=dp)
            np.square(dp, out=dp)
            np.subtract(1.0, dp, out=dp)
            ds *= dp
        ds *= n.scale
        np.matmul(ds, self.k, out=self.dq)
        self._kv_grad(ds, self.q, self.dk, n.d)
