"""bprop rules of the transformer ops: Attention (from its saved probabilities) and RMSNorm."""
from __future__ import annotations

from converter.train.bprop.rule import Bprop, Grads, bprop
from lite.status import NotSupportedError


@bprop("Attention", wrt=(0, 1, 2))
def attention(g: Bprop) -> Grads:
    """q, k, v -> AttentionGrad(dy, q, k, v, probs) -> dq, dk, dv. The mask gets no gradient; a KV cache or a
    padding length (inference-time inputs) is refused."""
    q, k, v = g.node.inputs[:3]
    if any(g.node.inputs[4:]):
        raise NotSupportedError(f"Attention node '{g.prefix}': training through a KV cache or nonpad_kv_seqlen is "
                                "not supported")
    return g.grads("AttentionGrad", [g.dy, q, k, v, g.node.outputs[1]], [0, 1, 2])


@bprop("RMSNorm")
def rms_norm(g: Bprop) -> Grads:
    """x, scale -> RMSNormGrad(dy, x, scale, invrms) -> dx, dscale (the training forward outputs invrms)."""
    x, scale = g.node.inputs[:2]
    return g.grads("RMSNormGrad", [g.dy, x, scale, g.node.outputs[1]], [0, 1])
