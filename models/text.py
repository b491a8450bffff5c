"""Text models built in PyTorch and exported with ``torch.onnx.export`` (TorchScript exporter), seeded, as a user's
small on-device text classifier looks; and one encoder written with the opset-23 ``Attention`` op.

``TextEncoder``: token embeddings + learned positions -> ``layers`` nn.TransformerEncoderLayer (post-norm, GELU,
no dropout) -> mean over tokens -> linear classifier. ``text_encoder`` exports it at opset 14, where PyTorch spells
LayerNormalization, GELU and attention out in elementwise ops: the converter's fusion passes turn them back into
LayerNorm, Activation GELU and Attention. Input ``tokens`` [N, L] (int64), output ``logits`` [N, classes].

``attention_encoder``: the same architecture in one layer written with onnx.helper at opset 23: ``Attention``
(3-D, q_num_heads = kv_num_heads), ``LayerNormalization`` and ``Gelu``, weights from a seeded ``TextEncoder``.
"""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

OPSET = 14


class TextEncoder(nn.Module):
    def __init__(self, vocab: int = 64, length: int = 16, width: int = 32, heads: int = 4, layers: int = 2,
                 classes: int = 3, ff: int = 64):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(1, length, width) * 0.1)
        layer = nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)
        for layer in self.encoder.layers:       # distinct layers (the exporter merges equal initializers)
            for module in layer.modules():
                if module is not layer and hasattr(module, "reset_parameters"):
                    module.reset_parameters()
            layer.self_attn._reset_parameters()
            for norm in (layer.norm1, layer.norm2):     # as after training: not all ones and zeros
                nn.init.normal_(norm.weight, 1.0, 0.1)
                nn.init.normal_(norm.bias, 0.0, 0.1)
            nn.init.normal_(layer.self_attn.in_proj_bias, 0.0, 0.1)
            nn.init.normal_(layer.self_attn.out_proj.bias, 0.0, 0.1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[:, :tokens.shape[1]]
        return self.head(self.encoder(x).mean(dim=1))


def export(module: nn.Module, tokens: torch.Tensor, opset: int = OPSET) -> onnx.ModelProto:
    """`module` exported in eval mode with input ``tokens`` and output ``logits`` (weights kept as initializers)."""
    buf = io.BytesIO()
    with warnings.catch_warnings():      # the TorchScript exporter warns that it is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (tokens,), buf, input_names=["tokens"], output_names=["logits"],
                          opset_version=opset, dynamo=False, do_constant_folding=False,
                          training=torch.onnx.TrainingMode.EVAL)
    return onnx.load_from_string(buf.getvalue())


def text_encoder(seed: int = 0, batch: int = 4, **sizes: int) -> tuple[TextEncoder, onnx.ModelProto]:
    """A seeded TextEncoder and its opset-14 export for input [batch, length]."""
    torch.manual_seed(seed)
    module = TextEncoder(**sizes)
    length = module.position.shape[1]
    return module, export(module, torch.zeros(batch, length, dtype=torch.int64))


def encoder_weights(module: TextEncoder) -> dict[str, np.ndarray]:
    """The initializers of `attention_encoder`, by name, from a one-layer TextEncoder's parameters (slices and
    transposes of them: applied to the parameters' gradients, the same function gives the initializers'
    gradients)."""
    layer = module.encoder.layers[0]
    attn = layer.self_attn
    q_w, k_w, v_w = attn.in_proj_weight.chunk(3)
    q_b, k_b, v_b = attn.in_proj_bias.chunk(3)
    tensors = {"embed": module.embed.weight, "position": module.position}
    for name, weight, bias in (("q", q_w, q_b), ("k", k_w, k_b), ("v", v_w, v_b), ("attn", attn.out_proj.weight,
                               attn.out_proj.bias), ("ff1", layer.linear1.weight, layer.linear1.bias),
                               ("ff2", layer.linear2.weight, layer.linear2.bias),
                               ("logits", module.head.weight, module.head.bias)):
        tensors[f"{name}.weight"], tensors[f"{name}.bias"] = weight.T, bias
    for name, norm in (("norm1", layer.norm1), ("norm2", layer.norm2)):
        tensors[f"{name}.weight"], tensors[f"{name}.bias"] = norm.weight, norm.bias
    return {name: t.detach().numpy().astype(np.float32) for name, t in tensors.items()}


def attention_encoder(seed: int = 0, batch: int = 4, **sizes: int) -> tuple[TextEncoder, onnx.ModelProto]:
    """A one-layer seeded TextEncoder and the same network written with the opset-23 Attention op."""
    torch.manual_seed(seed)
    module = TextEncoder(layers=1, **sizes).eval()
    layer = module.encoder.layers[0]
    length = module.position.shape[1]
    nodes = [helper.make_node("Gather", ["embed", "tokens"], ["emb"]),
             helper.make_node("Add", ["emb", "position"], ["x"])]

    def dense(x: str, out: str) -> None:
        nodes.extend([helper.make_node("MatMul", [x, f"{out}.weight"], [f"{out}/mm"]),
                      helper.make_node("Add", [f"{out}/mm", f"{out}.bias"], [out])])

    for name in "qkv":
        dense("x", name)
    heads = layer.self_attn.num_heads
    nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["heads"], q_num_heads=heads, kv_num_heads=heads))
    dense("heads", "attn")
    nodes += [helper.make_node("Add", ["x", "attn"], ["res1"]),
              helper.make_node("LayerNormalization", ["res1", "norm1.weight", "norm1.bias"], ["h1"],
                               epsilon=layer.norm1.eps)]
    dense("h1", "ff1")
    nodes.append(helper.make_node("Gelu", ["ff1"], ["ff1/gelu"]))
    dense("ff1/gelu", "ff2")
    nodes += [helper.make_node("Add", ["h1", "ff2"], ["res2"]),
              helper.make_node("LayerNormalization", ["res2", "norm2.weight", "norm2.bias"], ["h2"],
                               epsilon=layer.norm2.eps),
              helper.make_node("ReduceMean", ["h2", "pool_axes"], ["pooled"], keepdims=0)]
    dense("pooled", "logits")
    inits = [numpy_helper.from_array(a, n) for n, a in encoder_weights(module).items()]
    graph = helper.make_graph(
        nodes, "attention_encoder", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [batch, length])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, module.head.out_features])],
        inits + [numpy_helper.from_array(np.array([1], np.int64), "pool_axes")])
    return module, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
