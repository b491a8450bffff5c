"""ONNX importer rules for onnxruntime's float contrib ops (domain com.microsoft), as its transformer optimizer and
exporters write them: Gelu, FastGelu, BiasGelu, QuickGelu, FusedConv, FusedGemm, FusedMatMul,
SimplifiedLayerNormalization (default domain), SkipLayerNormalization, SkipSimplifiedLayerNormalization,
EmbedLayerNormalization, Attention, MultiHeadAttention, GroupQueryAttention, RotaryEmbedding, MatMulNBits,
DynamicQuantizeLSTM.

Each is decomposed onto the default-domain rules of the ops it fuses (`ImportContext.delegate`), so it runs on
their kernels and the fusion passes see the same graph as for the unfused model.
"""
from __future__ import annotations

import numpy as np

from converter.frontends.onnx.registry import MICROSOFT, ImportContext, onnx_op
from converter.frontends.onnx.rules.activations import emit_swish
from lite.dtypes import DataType
from schema import fb

A = fb.ActivationType
ATTENTION_OPSET = 23      # the first opset with Attention, RotaryEmbedding and RMSNormalization
CACHE_OPSET = 24          # the first with TensorScatter and Attention's nonpad_kv_seqlen (an external KV cache)
MASK_FILTER = -10000.0    # onnxruntime's default mask_filter_value: what a masked-out score gets added


def _fresh(ctx: ImportContext, what: str) -> str:
    return ctx.graph.fresh(f"{ctx.name}:{what}")


def _added(ctx: ImportContext, x: str, *others: str) -> str:
    """x + each present operand of `others`."""
    for other in others:
        if other:
            x = ctx.emit1("Add", [x, other])
    return x


# ---- activations ------------------------------------------------------------------------------------------------
@onnx_op("Gelu", "BiasGelu", domain=MICROSOFT)
def gelu(ctx: ImportContext) -> None:
    """Gelu(x), BiasGelu(a, bias) = Gelu(a + bias): the erf form."""
    ctx.emit("Activation", [_added(ctx, ctx.input(0), ctx.input(1))], ctx.outputs[:1], type=A.GELU)


@onnx_op("FastGelu", domain=MICROSOFT)
def fast_gelu(ctx: ImportContext) -> None:
    """The tanh approximation of Gelu(x + bias)."""
    ctx.emit("Activation", [_added(ctx, ctx.input(0), ctx.input(1))], ctx.outputs[:1], type=A.GELU_TANH)


@onnx_op("QuickGelu", domain=MICROSOFT)
def quick_gelu(ctx: ImportContext) -> None:
    """x * sigmoid(alpha * x), alpha 1.702 by default."""
    ctx.emit("Identity", [emit_swish(ctx, ctx.input(0), float(ctx.attr("alpha", 1.702)))], ctx.outputs[:1])


_ACTIVATION_PARAMS = {"LeakyRelu": ("alpha",), "HardSigmoid": ("alpha", "beta"), "Elu": ("alpha",),
                      "Selu": ("alpha", "gamma"), "ThresholdedRelu": ("alpha",)}


def _activated(ctx: ImportContext, y: str, output: str, params: list[float]) -> None:
    """The node's `activation` (with its params: a list, or Clip's min and max) applied to y into `output`."""
    kind = ctx.attr("activation", "")
    if not kind:
        ctx.emit("Identity", [y], [output])
    elif kind == "Clip":
        low, high = (params + [-np.inf, np.inf][len(params):])[:2]
        bounds = [ctx.add_const(np.array(v, np.float32), name) for v, name in ((low, "min"), (high, "max"))]
        ctx.delegate("Clip", [y, *bounds], [output], opset=max(ctx.default_opset, 11))
    elif kind in ("Relu", "Sigmoid", "Tanh", "Softsign", "Softplus") or kind in _ACTIVATION_PARAMS:
        names = _ACTIVATION_PARAMS.get(kind, ())
        ctx.delegate(kind, [y], [output], **dict(zip(names, params)))
    else:
        raise ctx.error(f"activation '{kind}' is not supported")


@onnx_op("FusedConv", domain=MICROSOFT)
def fused_conv(ctx: ImportContext) -> None:
    """Conv(X, W, B) [+ Z], then `activation` (params in activation_params)."""
    y = _fresh(ctx, "conv")
    ctx.delegate("Conv", ctx.inputs[:3], [y], **{a.name: ctx.attr(a.name) for a in ctx.node.attribute
                                                  if a.name not in ("activation", "activation_params")})
    _activated(ctx, _added(ctx, y, ctx.input(3)), ctx.outputs[0], list(ctx.attr("activation_params", [])))


@onnx_op("FusedGemm", domain=MICROSOFT)
def fused_gemm(ctx: ImportContext) -> None:
    """Gemm, then `activation` (params activation_alpha, activation_beta)."""
    y = _fresh(ctx, "gemm")
    ctx.delegate("Gemm", ctx.inputs, [y], **{a.name: ctx.attr(a.name) for a in ctx.node.attribute
                                             if a.name in ("alpha", "beta", "transA", "transB")})
    params = [float(ctx.attr(a)) for a in ("activation_alpha", "activation_beta") if ctx.has_attr(a)]
    _activated(ctx, y, ctx.outputs[0], params)


@onnx_op("FusedMatMul", domain=MICROSOFT)
def fused_matmul(ctx: ImportContext) -> None:
    """alpha * A' @ B', ' transposing the last two axes when transA / transB."""
    if ctx.attr("transBatchA", 0) or ctx.attr("transBatchB", 0):
        raise ctx.error("transBatchA / transBatchB are not supported")
    a, b = (_last_two_swapped(ctx, x) if ctx.attr(flag, 0) else x
            for x, flag in ((ctx.input(0), "transA"), (ctx.input(1), "transB")))
    alpha = float(ctx.attr("alpha", 1.0))
    if alpha == 1.0:
        ctx.delegate("MatMul", [a, b], ctx.outputs[:1])
        return
    y = _fresh(ctx, "matmul")
    ctx.delegate("MatMul", [a, b], [y])
    ctx.emit("Mul", [y, ctx.add_const(np.array(alpha, np.float32), "alpha")], ctx.outputs[:1])


def _last_two_swapped(ctx: ImportContext, x: str) -> str:
    rank = ctx.value(x).rank
    return ctx.emit1("Transpose", [x], perm=[*range(rank - 2), rank - 1, rank - 2])


# ---- normalization ------------------------------------------------------------------------------------------------
@onnx_op("SimplifiedLayerNormalization")
def simplified_layer_normalization(ctx: ImportContext) -> None:
    """RMS normalization x / sqrt(mean(x^2) + epsilon) * scale: onnxruntime defines it in the default domain
    (as its LayerNormalization before opset 17, which the default rule imports)."""
    ctx.delegate("RMSNormalization", ctx.inputs[:2], ctx.outputs[:1], opset=ATTENTION_OPSET,
                 axis=ctx.attr("axis", -1), epsilon=ctx.attr("epsilon", 1e-5))


@onnx_op("SkipLayerNormalization", domain=MICROSOFT)
def skip_layer_normalization(ctx: ImportContext) -> None:
    """LayerNorm(input + skip [+ bias]) over the last axis with gamma [and beta]; output 3 is the sum."""
    x, skip, gamma, beta, bias = (ctx.input(i) for i in range(5))
    outputs = ctx.outputs + [""] * (4 - len(ctx.outputs))
    total = _added(ctx, ctx.emit1("Add", [x, skip]), bias)
    if outputs[3]:
        ctx.emit("Identity", [total], [outputs[3]])
    ctx.delegate("LayerNormalization", [total, gamma, beta], [outputs[0]], opset=max(ctx.default_opset, 17),
                 axis=-1, epsilon=ctx.attr("epsilon", 1e-12))


@onnx_op("SkipSimplifiedLayerNormalization", domain=MICROSOFT)
def skip_simplified_layer_normalization(ctx: ImportContext) -> None:
    """RMS normalization of input + skip [+ bias] over the last axis with gamma; output 3 is the sum."""
    x, skip, gamma, bias = (ctx.input(i) for i in range(4))
    outputs = ctx.outputs + [""] * (4 - len(ctx.outputs))
    total = _added(ctx, ctx.emit1("Add", [x, skip]), bias)
    if outputs[3]:
        ctx.emit("Identity", [total], [outputs[3]])
    ctx.delegate("RMSNormalization", [total, gamma], [outputs[0]], opset=ATTENTION_OPSET, axis=-1,
                 epsilon=ctx.attr("epsilon", 1e-12))


@onnx_op("EmbedLayerNormalization", domain=MICROSOFT)
def embed_layer_normalization(ctx: ImportContext) -> None:
    """LayerNorm(word[ids] + position[position_ids or 0..S-1] [+ segment[segment_ids]]); outputs the mask index
    (the count of ones per row of mask, int32) and, as output 2, the embedding sum."""
    ids, segments, word, position, segment, gamma, beta, mask, positions = (ctx.input(i) for i in range(9))
    outputs = ctx.outputs + [""] * (3 - len(ctx.outputs))
    if not positions:
        length = ctx.value(ids).shape[1]
        if length < 0:
            raise ctx.error("input_ids needs a static sequence length when position_ids is not given")
        positions = ctx.add_const(np.arange(length, dtype=np.int64)[None], "position_ids")
    total = ctx.emit1("Add", [ctx.emit1("Gather", [word, ids], axis=0), ctx.emit1("Gather", [position, positions],
                                                                                  axis=0)])
    if segments:
        total = ctx.emit1("Add", [total, ctx.emit1("Gather", [segment, segments], axis=0)])
    if outputs[2]:
        ctx.emit("Identity", [total], [outputs[2]])
    ctx.delegate("LayerNormalization", [total, gamma, beta], [outputs[0]], opset=max(ctx.default_opset, 17),
                 axis=-1, epsilon=ctx.attr("epsilon", 1e-12))
    if outputs[1]:
        ctx.emit("Identity", [_mask_index(ctx, mask, ids)], [outputs[1]])


def _mask_index(ctx: ImportContext, mask: str, ids: str) -> str:
    """The count of ones in each row of `mask` as int32; without a mask, every row's full length."""
    if not mask:
        batch, length = ctx.value(ids).shape
        return ctx.add_const(np.full(batch, length, np.int32), "mask_index")
    ones = _fresh(ctx, "ones")
    ctx.delegate("ReduceSum", [mask, ctx.add_const(np.array([1], np.int64), "axis")], [ones], opset=13, keepdims=0)
    return ctx.emit1("Cast", [ones], to=DataType.INT32)


# ---- attention ------------------------------------------------------------------------------------------------
def _attention(ctx: ImportContext, q: str, k: str, v: str, mask: str, heads: int) -> None:
    """The default-domain Attention over 3-D q, k, v [B, S, heads * head_size] into the node's first output;
    `mask` [B, S_kv] (1 keeps a key, 0 masks it out) adds MASK_FILTER to the masked scores."""
    inputs = [q, k, v]
    if mask:
        real = ctx.emit1("Cast", [mask], to=DataType.FLOAT32)
        one = ctx.add_const(np.array(1, np.float32), "one")
        bias = ctx.emit1("Mul", [ctx.emit1("Sub", [one, real]), ctx.add_const(np.array(MASK_FILTER, np.float32),
                                                                                 "filter")])
        shape = ctx.add_const(np.array([0, 1, 1, -1], np.int64), "mask_shape")    # [B, 1, 1, S_kv]
        inputs.append(ctx.emit1("Reshape", [bias, shape]))
    ctx.delegate("Attention", inputs, ctx.outputs[:1], opset=ATTENTION_OPSET, q_num_heads=heads,
                 kv_num_heads=heads, scale=ctx.attr("scale"), is_causal=ctx.attr("unidirectional", 0))


def _key_mask(ctx: ImportContext, mask: str) -> str:
    """A 2-D [B, S_kv] 0/1 key mask, the only mask_index form supported; "" for none."""
    if mask and ctx.value(mask).rank != 2:
        raise ctx.error(f"a rank-{ctx.value(mask).rank} mask is not supported (only [batch, kv length] of 0 / 1)")
    return mask


def _no_state(ctx: ImportContext, *names: str) -> None:
    """Refuse the past / present key-value cache inputs this rule does not read."""
    given = [n for n in names if ctx.input(_INPUT_POSITIONS[ctx.node.op_type][n])]
    if given or len([o for o in ctx.outputs if o]) > 1:
        raise ctx.error("past / present key-value state is not supported")


_INPUT_POSITIONS = {"Attention": {"past": 4, "attention_bias": 5, "past_sequence_length": 6},
                    "MultiHeadAttention": {"attention_bias": 5, "past_key": 6, "past_value": 7}}


@onnx_op("Attention", domain=MICROSOFT)
def contrib_attention(ctx: ImportContext) -> None:
    """input [B, S, hidden] @ weights [hidden, q + k + v] + bias, split (qkv_hidden_sizes, or thirds), then
    multi-head attention of num_heads heads; mask_index as a [B, S] 0 / 1 key mask."""
    x, weights, bias, mask = (ctx.input(i) for i in range(4))
    _no_state(ctx, "past", "attention_bias", "past_sequence_length")
    heads = int(ctx.attr("num_heads", 0))
    width = ctx.value(weights).shape[1]
    sizes = list(ctx.attr("qkv_hidden_sizes", [width // 3] * 3))
    projected = _added(ctx, ctx.emit1("MatMul", [x, weights]), bias)
    q, k, v = ctx.emit("Split", [projected, ctx.add_const(np.array(sizes, np.int64), "sizes")], 3, axis=-1)
    _attention(ctx, q, k, v, _key_mask(ctx, mask), heads)


@onnx_op("MultiHeadAttention", domain=MICROSOFT)
def multi_head_attention(ctx: ImportContext) -> None:
    """3-D query, key, value [B, S, heads * head_size], bias [q + k + v] added to them, key_padding_mask a
    [B, S_kv] 0 / 1 key mask."""
    q, k, v, bias, mask = (ctx.input(i) for i in range(5))
    _no_state(ctx, "attention_bias", "past_key", "past_value")
    if not k or not v or any(ctx.value(t).rank != 3 for t in (q, k, v)):
        raise ctx.error("only separate 3-D query, key and value are supported")
    if bias:
        widths = [ctx.value(t).shape[-1] for t in (q, k, v)]
        parts = ctx.emit("Split", [bias, ctx.add_const(np.array(widths, np.int64), "sizes")], 3, axis=0)
        q, k, v = (ctx.emit1("Add", [t, b]) for t, b in zip((q, k, v), parts))
    _attention(ctx, q, k, v, _key_mask(ctx, mask), int(ctx.attr("num_heads", 0)))


@onnx_op("GroupQueryAttention", domain=MICROSOFT)
def group_query_attention(ctx: ImportContext) -> None:
    """Causal attention of num_heads query heads over kv_num_heads key / value heads, with onnxruntime's KV cache.

    Without past state (a prompt): plain causal attention (a right-padded row's valid positions attend to no
    padding, so seqlens_k changes nothing there; the outputs at padding are unspecified); present_key /
    present_value are the keys and values as [B, kv heads, S, head size]. With past_key / past_value [B, kv heads,
    L, head size]: row b holds seqlens_k[b] + 1 - S past positions (0 for a first prompt); present is the past
    padded to max(total_sequence_length, L) positions, the new keys written after the row's past (TensorScatter)
    and zeros after them, and query s attends causally to positions up to past + s (Attention's
    nonpad_kv_seqlen = past + S). do_rotary rotates query and key at their absolute positions (cos_cache,
    sin_cache). Packed QKV, local windows, smooth softmax, position_ids, attention_bias and head_sink are
    refused."""
    q, k, v, past_key, past_value, seqlens, total, cos, sin = (ctx.input(i) for i in range(9))
    if not k or any(ctx.input(i) for i in range(9, 12)) or bool(past_key) != bool(past_value):
        raise ctx.error("only separate query, key and value (past_key with past_value, no position_ids, "
                        "attention_bias or head_sink) are supported")
    if ctx.attr("local_window_size", -1) != -1 or ctx.attr("smooth_softmax", 0):
        raise ctx.error("local_window_size and smooth_softmax are not supported")
    heads, kv_heads = int(ctx.attr("num_heads", 0)), int(ctx.attr("kv_num_heads", 0))
    q4, k4, v4 = (_heads_first(ctx, t, n) for t, n in ((q, heads), (k, kv_heads), (v, kv_heads)))
    if not past_key:
        if ctx.attr("do_rotary", 0):
            steps = _onnx(ctx, "Range", [_i64(ctx, 0), _onnx(ctx, "Squeeze", [_length(ctx, q, 1)]), _i64(ctx, 1)])
            shape = _onnx(ctx, "Concat", [_length(ctx, q, 0), _length(ctx, q, 1)], axis=0)
            positions = _onnx(ctx, "Expand", [steps, shape])                          # [B, S]: 0 .. S-1
            q4, k4 = (_rotated(ctx, t, cos, sin, positions) for t in (q4, k4))
        y4 = _onnx(ctx, "Attention", [q4, k4, v4], opset=ATTENTION_OPSET, scale=ctx.attr("scale"), is_causal=1,
                   softcap=ctx.attr("softcap"))
        _heads_last(ctx, y4, ctx.outputs[0])
        for state, output in zip((k4, v4), ctx.outputs[1:3]):
            if output:
                ctx.emit("Identity", [state], [output])
        return
    steps = _length(ctx, q, 1)                                                       # S, [1]
    total_b = _onnx(ctx, "Add", [_onnx(ctx, "Cast", [seqlens], to=7), _i64(ctx, 1)])
    past_b = _onnx(ctx, "Max", [_onnx(ctx, "Sub", [total_b, steps]), _i64(ctx, 0)])    # [B]
    nonpad = _onnx(ctx, "Add", [past_b, steps])
    if ctx.attr("do_rotary", 0):
        positions = _onnx(ctx, "Add", [_onnx(ctx, "Unsqueeze", [past_b, _i64(ctx, [1])]),
                                       _onnx(ctx, "Range", [_i64(ctx, 0), _onnx(ctx, "Squeeze", [steps]),
                                                            _i64(ctx, 1)])])
        q4, k4 = (_rotated(ctx, t, cos, sin, positions) for t in (q4, k4))
    cached = _onnx(ctx, "Reshape", [_onnx(ctx, "Cast", [total], to=7), _i64(ctx, [1])])
    length = _onnx(ctx, "Max", [cached, _length(ctx, past_key, 2)])                  # max(total, L), [1]
    grow = _onnx(ctx, "Sub", [length, _length(ctx, past_key, 2)])
    pads = _onnx(ctx, "Concat", [_i64(ctx, [0] * 6), grow, _i64(ctx, [0])], axis=0)
    keep = _onnx(ctx, "Less", [_onnx(ctx, "Range", [_i64(ctx, 0), _onnx(ctx, "Squeeze", [length]), _i64(ctx, 1)]),
                               _onnx(ctx, "Unsqueeze", [nonpad, _i64(ctx, [1])])])    # [B, P]
    keep = _onnx(ctx, "Unsqueeze", [keep, _i64(ctx, [1, 3])])                        # [B, 1, P, 1]
    present = []
    for past, new, output in zip((past_key, past_value), (k4, v4), ctx.outputs[1:3]):
        written = _onnx(ctx, "TensorScatter", [_onnx(ctx, "Pad", [past, pads]), new, past_b], opset=CACHE_OPSET,
                        axis=2)
        zero = ctx.add_const(np.zeros((), ctx.value(past).dtype), "zero")
        present.append(_onnx(ctx, "Where", [keep, written, zero]))
        if output:
            ctx.emit("Identity", [present[-1]], [output])
    y4 = _onnx(ctx, "Attention", [q4, *present, "", "", "", nonpad], opset=CACHE_OPSET, scale=ctx.attr("scale"),
               is_causal=1, softcap=ctx.attr("softcap"))
    _heads_last(ctx, y4, ctx.outputs[0])


def _onnx(ctx: ImportContext, op: str, inputs: list[str], opset: int | None = None, **attrs) -> str:
    """A default-domain `op` node's output, imported by its own rule (`ImportContext.delegate`)."""
    output = _fresh(ctx, op)
    ctx.delegate(op, inputs, [output], opset=opset, **attrs)
    return output


def _i64(ctx: ImportContext, value) -> str:
    return ctx.add_const(np.array(value, np.int64), "index")


def _length(ctx: ImportContext, x: str, axis: int) -> str:
    """x's extent along `axis` as an int64 [1] (a constant when it is static)."""
    return _onnx(ctx, "Shape", [x], start=axis, end=axis + 1)


def _heads_first(ctx: ImportContext, x: str, heads: int) -> str:
    """[B, S, heads * D] -> [B, heads, S, D]."""
    split = ctx.emit1("Reshape", [x, ctx.add_const(np.array([0, 0, heads, -1], np.int64), "heads")])
    return ctx.emit1("Transpose", [split], perm=[0, 2, 1, 3])


def _heads_last(ctx: ImportContext, x4: str, output: str) -> None:
    """[B, heads, S, D] -> [B, S, heads * D] into `output`."""
    moved = ctx.emit1("Transpose", [x4], perm=[0, 2, 1, 3])
    ctx.emit("Reshape", [moved, ctx.add_const(np.array([0, 0, -1], np.int64), "merged")], [output])


def _rotated(ctx: ImportContext, x4: str, cos: str, sin: str, positions: str) -> str:
    """x4 [B, heads, S, D] rotated at `positions` [B, S] with the first 2 * cos_cache.shape[1] dims."""
    if not cos or not sin:
        raise ctx.error("do_rotary needs cos_cache and sin_cache")
    return _onnx(ctx, "RotaryEmbedding", [x4, cos, sin, positions], opset=ATTENTION_OPSET,
                 interleaved=ctx.attr("rotary_interleaved", 0), rotary_embedding_dim=2 * ctx.value(cos).shape[1])


@onnx_op("RotaryEmbedding", domain=MICROSOFT)
def contrib_rotary_embedding(ctx: ImportContext) -> None:
    """input, position_ids, cos_cache, sin_cache (the default-domain op's inputs in another order); a 1-element
    position_ids is the offset of the first position."""
    x, positions, cos, sin = (ctx.input(i) for i in range(4))
    if ctx.attr("scale", 1.0) != 1.0:
        raise ctx.error("scale other than 1 is not supported")
    offset = ctx.const(positions)
    if offset is not None and offset.size == 1:
        batch, length = ctx.value(x).shape[:2] if ctx.value(x).rank == 3 else np.array(ctx.value(x).shape)[[0, 2]]
        positions = ctx.add_const(np.broadcast_to(int(offset.ravel()[0]) + np.arange(length, dtype=np.int64),
                                                  (batch, length)).copy(), "position_ids")
    ctx.delegate("RotaryEmbedding", [x, cos, sin, positions], ctx.outputs[:1], opset=ATTENTION_OPSET,
                 interleaved=ctx.attr("interleaved", 0), num_heads=ctx.attr("num_heads", 0),
                 rotary_embedding_dim=ctx.attr("rotary_embedding_dim", 0))


# ---- quantized weights ------------------------------------------------------------------------------------------
@onnx_op("MatMulNBits", domain=MICROSOFT)
def matmul_nbits(ctx: ImportContext) -> None:
    """A [.., K] @ W + bias, W [K, N] dequantized at import from B [N, blocks, block bytes] of `bits`-bit values
    (low bits first), per-block scales [N * blocks] and zero points (packed like B, or float; 2^(bits-1) when
    absent): w = (q - zp) * scale, as onnxruntime dequantizes it."""
    a, b, scales, zero_points, g_idx, bias = (ctx.input(i) for i in range(6))
    k, n, bits, block = (int(ctx.attr(name, default)) for name, default in
                         (("K", 0), ("N", 0), ("bits", 4), ("block_size", 0)))
    if g_idx or bits not in (2, 4, 8) or block < 16:
        raise ctx.error(f"bits={bits}, block_size={block}{' and g_idx' if g_idx else ''} are not supported")
    blocks = -(-k // block)
    q = _unpacked(ctx.require_const(b, "B"), bits).reshape(n, blocks * block)
    scale = ctx.require_const(scales, "scales").astype(np.float32).reshape(n, blocks)
    zp = ctx.const(zero_points) if zero_points else None
    if zero_points and zp is None:
        raise ctx.error("zero_points must be a constant")
    if zp is None:
        zero = np.full((n, blocks), 1 << (bits - 1), np.float32)
    elif zp.dtype == np.uint8:
        zero = _unpacked(zp, bits).reshape(n, -1)[:, :blocks].astype(np.float32)
    else:
        zero = zp.astype(np.float32).reshape(n, blocks)
    real = (q.reshape(n, blocks, block).astype(np.float32) - zero[..., None]) * scale[..., None]
    weight = ctx.add_const(np.ascontiguousarray(real.reshape(n, -1)[:, :k].T), "weight")
    if bias:
        y = _fresh(ctx, "matmul")
        ctx.delegate("MatMul", [a, weight], [y])
        ctx.emit("Add", [y, bias], ctx.outputs[:1])
    else:
        ctx.delegate("MatMul", [a, weight], ctx.outputs[:1])


def _unpacked(packed: np.ndarray, bits: int) -> np.ndarray:
    """The `bits`-bit unsigned values packed in bytes, the lowest bits first, in the bytes' shape with the last
    axis widened."""
    per_byte = 8 // bits
    shifts = np.arange(per_byte, dtype=np.uint8) * bits
    values = (packed[..., None] >> shifts) & ((1 << bits) - 1)
    return values.reshape(*packed.shape[:-1], packed.shape[-1] * per_byte)


@onnx_op("DynamicQuantizeLSTM", domain=MICROSOFT)
def dynamic_quantize_lstm(ctx: ImportContext) -> None:
    """The LSTM of X, W, R, B, sequence_lens, initial_h, initial_c, P over int8 / uint8 W [D, input, 4H] and
    R [D, H, 4H] with per-direction or per-column W_scale, W_zero_point, R_scale, R_zero_point (inputs 8-11): our
    LSTM with those four inputs, W and R transposed to ONNX's [D, 4H, rows], runs it as onnxruntime does
    (quantizing X and each step's h)."""
    weights = [ctx.add_const(np.ascontiguousarray(ctx.require_const(ctx.input(i), "the quantized weights")
                                                  .transpose(0, 2, 1)), "weight") for i in (1, 2)]
    params = [ctx.add_const(ctx.require_const(ctx.input(i), what), what.replace(" ", "_")) for i, what in
              ((8, "W scale"), (9, "W zero point"), (10, "R scale"), (11, "R zero point"))]
    inputs = [ctx.input(0), *weights, *(ctx.input(i) for i in range(3, 8)), *params]
    attrs = {a.name: ctx.attr(a.name) for a in ctx.node.attribute}
    ctx.delegate("LSTM", inputs, ctx.outputs, **attrs)
