"""LinearAttention (ONNX opset 27): causal attention with a running state instead of a softmax over all keys.

Each key/value head carries a state S [d_k, d_v]; per token t (g_t the log-space decay, beta_t the update rate):
    linear       S = S + k v^T
    gated        S = exp(g) S + k v^T
    delta        S = S + beta k (v - S^T k)^T
    gated_delta  S = exp(g) S + beta k (v - (exp(g) S)^T k)^T
and o_t = scale q_t^T S. The tokens depend on each other only through S, so the loop runs over tokens and every
step is a handful of broadcasting products over all batch rows and heads at once (never a loop over heads).
Grouped-query heads are a view: Q [B, T, Hq * d_k] is read as [B, T, Hkv, G, d_k] (query head h uses key/value
head h // G, ONNX's repeat-interleave), so the read o = q S is one matmul of [B, Hkv, G, d_k] by
[B, Hkv, d_k, d_v]. exp(decay) and the output scale are applied once for the whole sequence, outside the loop.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from schema import fb

R = fb.LinearUpdateRule
RULE_NAMES = {R.LINEAR: "linear", R.GATED: "gated", R.DELTA: "delta", R.GATED_DELTA: "gated_delta"}


def linear_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, gate: np.ndarray | None,
                     beta: np.ndarray | None, state: np.ndarray, y: np.ndarray, outer: np.ndarray,
                     update: np.ndarray) -> None:
    """Run the recurrence over T tokens, updating `state` [B, Hkv, d_k, d_v] in place.

    q [B, T, Hkv, G, d_k], k [B, T, Hkv, d_k], v [B, T, Hkv, d_v]; gate = exp(decay) [B, T, Hkv, d_k or 1] or
    None; beta [B, T, Hkv or 1, 1] or None (no delta correction); y [B, T, Hkv, G, d_v] gets q^T S unscaled.
    outer [B, Hkv, d_k, d_v] and update [B, Hkv, 1, d_v] are work buffers."""
    for t in range(q.shape[1]):
        k_t = k[:, t, :, :, None]                                   # [B, Hkv, d_k, 1]
        if gate is not None:
            state *= gate[:, t, :, :, None]
        if beta is not None:                                        # update = beta (v - S^T k)
            np.matmul(k_t.swapaxes(-1, -2), state, out=update)
            np.subtract(v[:, t, :, None], update, out=update)
            update *= beta[:, t, :, :, None]
        else:
            update[...] = v[:, t, :, None]
        np.multiply(k_t, update, out=outer)
        state += outer
        np.matmul(q[:, t], state, out=y[:, t])


@register("LinearAttention", DataType.FLOAT32)
class LinearAttentionKernel(Kernel):
    """inputs: query, key, value, past_state?, decay?, beta? -> output, present_state."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        q, k, v = inputs[:3]
        past, decay, beta = (list(inputs[3:6]) + [None] * 3)[:3]
        a, rule = self.attrs, self.attrs.update_rule
        if rule not in RULE_NAMES:
            raise self.error(f"update_rule {rule} is not one of {', '.join(RULE_NAMES.values())}",
                             InvalidOpAttrError)
        hq, hkv = a.q_num_heads, a.kv_num_heads
        if hq < 1 or hkv < 1 or hq % hkv:
            raise self.error(f"q_num_heads {hq} must be a positive multiple of kv_num_heads {hkv}",
                             InvalidOpAttrError)
        if not q.rank == k.rank == v.rank == 3 or q.shape[2] % hq or v.shape[2] % hkv:
            raise self.error(f"query, key and value must be [batch, seq, heads * head_size] with {hq} query and "
                             f"{hkv} key/value heads, got {list(q.shape)}, {list(k.shape)}, {list(v.shape)}")
        b, t = q.shape[:2]
        self.dk, self.dv = q.shape[2] // hq, v.shape[2] // hkv
        if k.shape != (b, t, hkv * self.dk) or v.shape[:2] != (b, t):
            raise self.error(f"key {list(k.shape)} and value {list(v.shape)} do not match query {list(q.shape)} "
                             f"([{b}, {t}, {hkv} * {self.dk}] and [{b}, {t}, {hkv} * d_v])")
        gated, delta = rule in (R.GATED, R.GATED_DELTA), rule in (R.DELTA, R.GATED_DELTA)
        for spec, needed, name in ((decay, gated, "decay"), (beta, delta, "beta")):
            if (spec is not None) != needed:
                raise self.error(f"update rule {RULE_NAMES[rule]} {'needs' if needed else 'takes no'} {name} input",
                                 InvalidOpAttrError)
        if decay is not None and decay.shape not in ((b, t, hkv), (b, t, hkv * self.dk)):
            raise self.error(f"decay must be [{b}, {t}, {hkv}] or [{b}, {t}, {hkv * self.dk}], got "
                             f"{list(decay.shape)}")
        if beta is not None and beta.shape not in ((b, t, hkv), (b, t, 1)):
            raise self.error(f"beta must be [{b}, {t}, {hkv}] or [{b}, {t}, 1], got {list(beta.shape)}")
        state = (b, hkv, self.dk, self.dv)
        if past is not None and past.shape != state:
            raise self.error(f"past_state must be {list(state)}, got {list(past.shape)}")
        if len(self.node.outputs) != 2:
            raise self.error(f"has outputs output, present_state, not {len(self.node.outputs)}")
        self.scale = a.scale or 1.0 / float(np.sqrt(self.dk))
        self.sizes = (b, t, hkv, hq // hkv)
        self.decay_width = decay.shape[2] // hkv if decay is not None else 0     # d_k or 1 per head
        return [TensorSpec((b, t, hq * self.dv), q.dtype),
                TensorSpec(state, past.dtype if past is not None else q.dtype)]

    def scratch(self) -> list[TensorSpec]:
        b, t, hkv, _ = self.sizes
        gate = [TensorSpec((b, t, hkv, self.decay_width), np.dtype(np.float32))] if self.decay_width else []
        return [TensorSpec((b, hkv, self.dk, self.dv), np.dtype(np.float32)),
                TensorSpec((b, hkv, 1, self.dv), np.dtype(np.float32))] + gate

    def bind(self, inputs, outputs, scratch) -> None:
        b, t, hkv, g = self.sizes
        self.q = inputs[0].reshape(b, t, hkv, g, self.dk)
        self.k, self.v = inputs[1].reshape(b, t, hkv, self.dk), inputs[2].reshape(b, t, hkv, self.dv)
        self.y = outputs[0].reshape(b, t, hkv, g, self.dv)
        self.outer, self.update = scratch[:2]
        self.gate = scratch[2] if len(scratch) > 2 else None

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        b, t, hkv, _ = self.sizes
        past, decay, beta = (list(inputs[3:6]) + [None] * 3)[:3]
        state = outputs[1]
        if past is not None:
            np.copyto(state, past)
        else:
            state.fill(0)
        if self.gate is not None:
            np.exp(decay.reshape(self.gate.shape), out=self.gate)
        beta4 = beta.reshape(b, t, -1, 1) if beta is not None else None
        linear_attention(self.q, self.k, self.v, self.gate, beta4, state, self.y, self.outer, self.update)
        outputs[0] *= self.scale
