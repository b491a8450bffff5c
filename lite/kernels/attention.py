"""Attention (ONNX opset 23-25): softmax(scale * Q K^T (softcapped) + bias) V, with grouped-query heads.

Heads are handled in grouped views, never in a Python loop: Q [B, Hq, S, D] is viewed as [B, Hkv, G, S, D]
(G = Hq / Hkv; query head h reads key/value head h // G, ONNX's repeat-interleave) and K, V as
[B, Hkv, 1, T, D], so each of the two products is one broadcasting matmul over every batch and head. 3-D inputs
[B, S, H * D] are the same views with the head axis split out of the last one (no copy). The additive bias
(mask, causal and window limits, padding) is built once at compile time when every part of it is known.

A row whose bias masks every key gets zero probabilities (and Y = 0), as ONNX specifies, instead of NaN.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, NotSupportedError
from lite.traits import TrainMode, declare

QK_RAW, QK_SOFTCAP, QK_BIAS, QK_SOFTMAX = range(4)     # qk_matmul_output_mode
_FLOAT64 = 11                                           # ONNX TensorProto.DOUBLE (softmax_precision)


def split_heads(x: np.ndarray, heads: int) -> np.ndarray:
    """[B, S, H * D] -> a [B, H, S, D] view; 4-D input is returned as it is."""
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3) if x.ndim == 3 else x


def grouped(x4: np.ndarray, kv_heads: int) -> np.ndarray:
    """[B, H, S, D] -> a [B, Hkv, H / Hkv, S, D] view (splitting an axis never copies)."""
    b, h, s, d = x4.shape
    view = x4.view()
    view.shape = (b, kv_heads, h // kv_heads, s, d)       # raises rather than copy
    return view


def softcap(scores: np.ndarray, cap: float) -> None:
    """scores = cap * tanh(scores / cap), in place."""
    scores /= cap
    np.tanh(scores, out=scores)
    scores *= cap


def attention_bias(mask: np.ndarray | None, nonpad: np.ndarray | None, q_len: int, total: int, past: int,
                   is_causal: bool, left: int, right: int) -> np.ndarray | None:
    """The additive float32 bias (0 or -inf, plus a float mask's values), 4-D and broadcastable to
    [B, Hq, q_len, total]; None when nothing is masked. A bool mask is True where attending; a mask shorter
    than `total` is padded with masked keys. Causal and window limits are bottom-right aligned: query i sits at
    absolute position i + offset, offset = past (an internal cache) or nonpad[b] - q_len (an external one)."""
    bias = None
    if mask is not None:
        if mask.dtype == np.bool_:
            mask = np.where(mask, np.float32(0), np.float32(-np.inf))
        mask = mask.astype(np.float32, copy=False).reshape((1,) * (4 - mask.ndim) + mask.shape)
        if mask.shape[-1] < total:
            pad = np.full(mask.shape[:-1] + (total - mask.shape[-1],), -np.inf, np.float32)
            mask = np.concatenate([mask, pad], axis=-1)
        bias = mask
    if is_causal or left >= 0 or right >= 0 or nonpad is not None:
        offset = (np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1) - q_len) if nonpad is not None \
            else np.zeros((1, 1, 1, 1), np.int64) + past
        ahead = np.arange(total).reshape(1, -1) - np.arange(q_len).reshape(-1, 1) - offset   # key - query
        allowed = np.ones(ahead.shape, np.bool_)
        if is_causal:
            allowed &= ahead <= 0
        if left >= 0:
            allowed &= -ahead <= left
        if right >= 0:
            allowed &= ahead <= right
        if nonpad is not None:
            allowed &= np.arange(total) < np.asarray(nonpad, np.int64).reshape(-1, 1, 1, 1)
        limits = np.where(allowed, np.float32(0), np.float32(-np.inf))
        bias = limits if bias is None else bias + limits
    return bias


def masked_softmax(scores: np.ndarray, bias: np.ndarray | None, out: np.ndarray) -> None:
    """Softmax over the last axis of scores (+ bias, already added) into `out` (may be scores); rows whose bias
    is all -inf become zeros."""
    peak = scores.max(axis=-1, keepdims=True)
    peak[np.isneginf(peak)] = 0                             # a fully masked row: exp(-inf) = 0, not NaN
    np.subtract(scores, peak, out=out)
    np.exp(out, out=out)
    total = out.sum(axis=-1, keepdims=True)
    total[total == 0] = 1
    out /= total
    if bias is not None:
        dead = np.isneginf(bias.max(axis=-1, keepdims=True))
        if dead.any():
            np.copyto(out, 0, where=np.broadcast_to(dead, out.shape))


def grouped_bias(bias: np.ndarray, kv_heads: int) -> np.ndarray:
    """A 4-D bias [b, h, S, T] (h is 1 or Hq) as the 5-D grouped view that broadcasts against the scores."""
    b, h, s, t = bias.shape
    return bias.reshape(b, kv_heads, h // kv_heads, s, t) if h > 1 else bias.reshape(b, 1, 1, s, t)


def _broadcasts(mask: tuple[int, ...], full: tuple[int, ...]) -> bool:
    """Whether a mask of this shape (rank 1-4, its last axis possibly shorter) fits scores of shape `full`."""
    if not 1 <= len(mask) <= 4 or mask[-1] > full[-1]:
        return False
    lead = (1,) * (4 - len(mask)) + mask[:-1]
    return all(m in (1, f) for m, f in zip(lead, full[:3]))


class AttentionShapes:
    """The sizes of one Attention node: B, Hq, Hkv, S (queries), P (past), T = P + kv length, D, Dv, rank."""

    def __init__(self, kernel: Kernel, q: TensorSpec, k: TensorSpec, v: TensorSpec,
                 past: TensorSpec | None = None, past_v: TensorSpec | None = None):
        attrs = kernel.attrs
        if not q.rank == k.rank == v.rank or q.rank not in (3, 4):
            raise kernel.error(f"Q, K and V must all be 3-D or all 4-D, got ranks {q.rank}, {k.rank}, {v.rank}")
        self.rank = q.rank
        if q.rank == 3:
            self.hq, self.hkv = attrs.q_num_heads, attrs.kv_num_heads
            if self.hq < 1 or self.hkv < 1:
                raise kernel.error("3-D inputs need q_num_heads and kv_num_heads", InvalidOpAttrError)
            if q.shape[2] % self.hq or k.shape[2] % self.hkv or v.shape[2] % self.hkv:
                raise kernel.error(f"hidden sizes {q.shape[2]}, {k.shape[2]}, {v.shape[2]} do not split into "
                                   f"{self.hq} query and {self.hkv} key/value heads", InvalidOpAttrError)
            q4 = (q.shape[0], self.hq, q.shape[1], q.shape[2] // self.hq)
            k4 = (k.shape[0], self.hkv, k.shape[1], k.shape[2] // self.hkv)
            v4 = (v.shape[0], self.hkv, v.shape[1], v.shape[2] // self.hkv)
        else:
            q4, k4, v4 = q.shape, k.shape, v.shape
            self.hq, self.hkv = q4[1], k4[1]
        self.b, self.s, self.d, self.dv = q4[0], q4[2], q4[3], v4[3]
        if k4[0] != self.b or v4[0] != self.b or k4[1] != v4[1] or k4[2] != v4[2] or k4[3] != self.d:
            raise kernel.error(f"K {list(k4)} and V {list(v4)} (as [batch, heads, seq, head]) do not match "
                               f"Q {list(q4)}")
        if self.hq % self.hkv:
            raise kernel.error(f"{self.hq} query heads are not a multiple of {self.hkv} key/value heads")
        self.p = 0
        if (past is None) != (past_v is None):
            raise kernel.error("past_key and past_value must be given together")
        if past is not None:
            if past.rank != 4 or past.shape[:2] != (self.b, self.hkv) or past.shape[3] != self.d or \
                    past_v.shape != past.shape[:3] + (self.dv,):
                raise kernel.error(f"past_key {list(past.shape)} / past_value {list(past_v.shape)} must be "
                                   f"[{self.b}, {self.hkv}, past, {self.d}] / [.., {self.dv}]")
            self.p = past.shape[2]
        self.t = self.p + k4[2]
        self.scale = attrs.scale or 1.0 / float(np.sqrt(self.d))

    @property
    def y_shape(self) -> tuple[int, ...]:
        return (self.b, self.hq, self.s, self.dv) if self.rank == 4 else (self.b, self.s, self.hq * self.dv)

    @property
    def probs_shape(self) -> tuple[int, ...]:
        return (self.b, self.hq, self.s, self.t)

    def cache_shape(self, head: int) -> tuple[int, ...]:
        return (self.b, self.hkv, self.t, head)


declare("Attention", train=TrainMode(outputs=("probs",), flag=True))


@register("Attention", DataType.FLOAT32)
class AttentionKernel(Kernel):
    """inputs: q, k, v, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen? -> y, present_key?, present_value?,
    qk_output? (training: y, probs)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        q, k, v = inputs[:3]
        mask, past, past_v, nonpad = (list(inputs[3:7]) + [None] * 4)[:4]
        a = self.attrs
        self.shapes = n = AttentionShapes(self, q, k, v, past, past_v)
        if nonpad is not None and (past is not None or nonpad.shape != (n.b,)):
            raise self.error(f"nonpad_kv_seqlen must be [{n.b}] and cannot be used with a past cache")
        if mask is not None and not _broadcasts(mask.shape, (n.b, n.hq, n.s, n.t)):
            raise self.error(f"attn_mask {list(mask.shape)} does not broadcast to [{n.b}, {n.hq}, {n.s}, {n.t}] "
                             "(its last axis may be shorter)")
        if a.left_window_size < -1 or a.right_window_size < -1:
            raise self.error("window sizes must be -1 or non-negative", InvalidOpAttrError)
        if a.qk_matmul_output_mode not in range(4):
            raise self.error(f"qk_matmul_output_mode {a.qk_matmul_output_mode} is not 0-3", InvalidOpAttrError)
        count = len(self.node.outputs)
        if a.training and (count != 2 or past is not None):
            raise self.error("the training form has outputs y, probs and no past cache", NotSupportedError)
        if not a.training and count not in (1, 3, 4):
            raise self.error(f"has outputs y[, present_key, present_value[, qk_output]], not {count}")
        self.mask_static = all(s is None or s.value is not None for s in (mask, nonpad))
        self.bias = self._bias(mask.value if mask is not None else None,
                               nonpad.value if nonpad is not None else None) if self.mask_static else None
        probs = TensorSpec(n.probs_shape, q.dtype)
        if a.training:
            return [TensorSpec(n.y_shape, q.dtype), probs]
        present = [TensorSpec(n.cache_shape(n.d), k.dtype), TensorSpec(n.cache_shape(n.dv), v.dtype)]
        return ([TensorSpec(n.y_shape, q.dtype)] + present + [probs])[:count]

    def _bias(self, mask: np.ndarray | None, nonpad: np.ndarray | None) -> np.ndarray | None:
        n, a = self.shapes, self.attrs
        bias = attention_bias(mask, nonpad, n.s, n.t, n.p, a.is_causal, a.left_window_size, a.right_window_size)
        return None if bias is None else grouped_bias(np.ascontiguousarray(bias), n.hkv)

    def scratch(self) -> list[TensorSpec]:
        n = self.shapes
        wide = np.dtype(np.float64 if self.attrs.softmax_precision == _FLOAT64 else np.float32)
        own_caches = n.p and len(self.node.outputs) < 3
        caches = [TensorSpec(n.cache_shape(n.d), np.dtype(np.float32)),
                  TensorSpec(n.cache_shape(n.dv), np.dtype(np.float32))] if own_caches else []
        scores = [] if self.attrs.training and wide == np.float32 else [TensorSpec(n.probs_shape, wide)]
        return scores + caches

    def bind(self, inputs, outputs, scratch) -> None:
        n = self.shapes
        q, k, v = (split_heads(x, h) for x, h in zip(inputs[:3], (n.hq, n.hkv, n.hkv)))
        self.past = inputs[4:6] if len(inputs) > 5 and inputs[4] is not None else None
        work = list(scratch)
        self.scores = grouped(outputs[1] if self.attrs.training and not work else work.pop(0), n.hkv)
        if self.past is not None:
            self.caches = list(outputs[1:3]) if len(outputs) >= 3 else work[:2]
            k, v = self.caches
        self.new_kv = (split_heads(inputs[1], n.hkv), split_heads(inputs[2], n.hkv))
        self.q, self.k_t, self.v = grouped(q, n.hkv), k[:, :, None].swapaxes(-1, -2), v[:, :, None]
        self.y = grouped(split_heads(outputs[0], n.hq), n.hkv)
        self.probs = grouped(outputs[1], n.hkv) if self.attrs.training else None
        self.qk = grouped(outputs[3], n.hkv) if len(outputs) == 4 else None
        self.presents = outputs[1:3] if len(outputs) >= 3 and not self.attrs.training else None

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        n, a, s = self.shapes, self.attrs, self.scores
        if self.past is not None:
            for cache, past, new in zip(self.caches, self.past, self.new_kv):
                cache[:, :, :n.p] = past
                cache[:, :, n.p:] = new
        elif self.presents is not None:
            for present, new in zip(self.presents, self.new_kv):
                np.copyto(present, new)
        bias = self.bias if self.mask_static else self._bias(*(inputs[i] if len(inputs) > i else None
                                                               for i in (3, 6)))
        np.matmul(self.q, self.k_t, out=s)
        s *= n.scale
        self._expose(QK_RAW, s)
        if a.softcap > 0:
            softcap(s, a.softcap)
        self._expose(QK_SOFTCAP, s)
        if bias is not None:
            s += bias
        self._expose(QK_BIAS, s)
        masked_softmax(s, bias, s)
        if self.probs is not None and self.probs is not s:
            np.copyto(self.probs, s, casting="same_kind")
        self._expose(QK_SOFTMAX, s)
        np.matmul(s, self.v, out=self.y, casting="same_kind")

    def _expose(self, stage: int, scores: np.ndarray) -> None:
        """Copy the scores at `stage` into the qk output when its mode asks for that stage (mode 1 without a
        softcap is the raw product, the same values)."""
        if self.qk is not None and self.attrs.qk_matmul_output_mode == stage:
            np.copyto(self.qk, scores, casting="same_kind")
