"""ONNX importer rules for the transformer ops of opsets 23-28: Attention, RotaryEmbedding, RMSNormalization,
TensorScatter and LinearAttention map one to one onto our ops; SwiGLU (Swish(a) * b) and CausalConvWithState (a
depthwise Conv over the state and the input) are spelled out."""
from __future__ import annotations

import numpy as np
from onnx import helper

from converter.frontends.onnx.registry import ImportContext, onnx_op
from converter.frontends.onnx.rules.activations import emit_swish
from converter.frontends.onnx.rules.nn import conv
from lite.status import InvalidOpAttrError
from lite.kernels.linear_attention import RULE_NAMES

_UPDATE_RULES = {name: rule for rule, name in RULE_NAMES.items()}


def _outputs(ctx: ImportContext, count: int) -> list[str]:
    """The node's outputs padded to `count` (the op's fixed positions), omitted ones under throwaway names."""
    wanted = list(ctx.outputs) + [""] * (count - len(ctx.outputs))
    return [o or ctx.graph.fresh(f"{ctx.name}/unused") for o in wanted]


@onnx_op("Attention")
def attention(ctx: ImportContext) -> None:
    """Opsets 23-25 share one op: 24 adds nonpad_kv_seqlen (input 6), 25 the window sizes. Outputs keep their
    positions: y, present_key, present_value, qk_matmul_output."""
    count = len(ctx.outputs)
    if count > 1 and any(ctx.outputs[1:3]) != all(ctx.outputs[1:3]) or count == 2:
        raise ctx.error("present_key and present_value must be asked for together", InvalidOpAttrError)
    count = 4 if count == 4 and ctx.outputs[3] else 3 if count > 1 and ctx.outputs[1] else 1
    ctx.emit("Attention", ctx.inputs, _outputs(ctx, count), scale=float(ctx.attr("scale", 0.0)),
             is_causal=bool(ctx.attr("is_causal", 0)), softcap=float(ctx.attr("softcap", 0.0)),
             q_num_heads=int(ctx.attr("q_num_heads", 0)), kv_num_heads=int(ctx.attr("kv_num_heads", 0)),
             qk_matmul_output_mode=int(ctx.attr("qk_matmul_output_mode", 0)),
             softmax_precision=int(ctx.attr("softmax_precision", 0)),
             left_window_size=int(ctx.attr("left_window_size", -1)),
             right_window_size=int(ctx.attr("right_window_size", -1)))


@onnx_op("RotaryEmbedding")
def rotary_embedding(ctx: ImportContext) -> None:
    ctx.emit("RotaryEmbedding", ctx.inputs, ctx.outputs, interleaved=bool(ctx.attr("interleaved", 0)),
             rotary_embedding_dim=int(ctx.attr("rotary_embedding_dim", 0)), num_heads=int(ctx.attr("num_heads", 0)))


@onnx_op("RMSNormalization")
def rms_normalization(ctx: ImportContext) -> None:
    """stash_type (the statistics' precision) is float32 always: narrow floats are computed in float32."""
    ctx.emit("RMSNorm", ctx.inputs[:2], ctx.outputs[:1], axis=int(ctx.attr("axis", -1)),
             epsilon=float(ctx.attr("epsilon", 1e-5)))


@onnx_op("TensorScatter")
def tensor_scatter(ctx: ImportContext) -> None:
    mode = ctx.attr("mode", "linear")
    if mode not in ("linear", "circular"):
        raise ctx.error(f"mode must be 'linear' or 'circular', got '{mode}'", InvalidOpAttrError)
    ctx.emit("TensorScatter", ctx.inputs, ctx.outputs, circular=mode == "circular", axis=int(ctx.attr("axis", -2)))


@onnx_op("LinearAttention")
def linear_attention(ctx: ImportContext) -> None:
    """chunk_size is a tuning hint of chunk-parallel kernels that does not change the result: not kept."""
    rule = ctx.attr("update_rule", "gated_delta")
    if rule not in _UPDATE_RULES:
        raise ctx.error(f"update_rule must be one of {', '.join(_UPDATE_RULES)}, got '{rule}'", InvalidOpAttrError)
    ctx.emit("LinearAttention", ctx.inputs, _outputs(ctx, 2), update_rule=_UPDATE_RULES[rule],
             q_num_heads=int(ctx.attr("q_num_heads", 0)), kv_num_heads=int(ctx.attr("kv_num_heads", 0)),
             scale=float(ctx.attr("scale", 0.0)))


@onnx_op("SwiGLU")
def swiglu(ctx: ImportContext) -> None:
    """a * sigmoid(alpha * a) * b, a and b of one shape (no broadcasting, as the standard says)."""
    a, b = ctx.input(0), ctx.input(1)
    if ctx.value(a).shape != ctx.value(b).shape:
        raise ctx.error(f"inputs must have one shape, got {list(ctx.value(a).shape)} and {list(ctx.value(b).shape)}")
    ctx.emit("Mul", [emit_swish(ctx, a, float(ctx.attr("alpha", 1.0))), b], ctx.outputs)


@onnx_op("CausalConvWithState")
def causal_conv_with_state(ctx: ImportContext) -> None:
    """Opset 27's streaming depthwise causal conv, spelled out: padded = Concat(past_state or zeros, x) along
    time; y = the depthwise Conv of padded (ONNX's own Conv rule) [* sigmoid: silu]; present_state = padded's
    last k - 1 steps."""
    x, w, b, past = ctx.input(0), ctx.input(1), ctx.input(2), ctx.input(3)
    activation = ctx.attr("activation", "none")
    if activation not in ("none", "silu", "swish") or ctx.value(x).rank != 3 or ctx.value(w).rank != 3:
        raise ctx.error(f"needs input [B, C, L], weight [C, 1, k] and activation none/silu/swish, got "
                        f"{list(ctx.value(x).shape)}, {list(ctx.value(w).shape)}, '{activation}'",
                        InvalidOpAttrError)
    (batch, channels, _), k = ctx.value(x).shape, ctx.value(w).shape[2]
    if not past:
        past = ctx.add_const(np.zeros((batch, channels, k - 1), ctx.value(x).dtype), "zero_state")
    padded = ctx.emit1("Concat", [past, x], axis=2)
    conv_node, source = helper.make_node("Conv", [padded, w] + ([b] if b else []), [ctx.graph.fresh(
        f"{ctx.name}/conv")], group=channels, kernel_shape=[k]), ctx.node
    ctx.node = conv_node
    try:
        conv(ctx)
    finally:
        ctx.node = source
    y = conv_node.output[0]
    outputs = _outputs(ctx, 2)
    if activation == "none":
        ctx.emit("Identity", [y], outputs[:1])
    else:
        emit_swish(ctx, y, 1.0, outputs[0])
    start = ctx.value(padded).shape[2] - (k - 1)
    starts, ends, axes = (ctx.add_const(np.array([v], np.int64), n) for v, n in
                          ((start, "starts"), (np.iinfo(np.int64).max, "ends"), (2, "axes")))
    ctx.emit("Slice", [padded, starts, ends, axes], outputs[1:])
