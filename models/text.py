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


def attention_encoder(seed: int = 0, batch: int = 4, **sizes: int) -> tuple[TextEncoder, onnx.ModelProto]:
    """A one-layer seeded TextEncoder and the same network written with the opset-23 Attention op."""
    torch.manual_seed(seed)
    module = TextEncoder(layers=1, **sizes).eval()
    layer = module.encoder.layers[0]
    attn = layer.self_attn
    width, heads = attn.embed_dim, attn.num_heads
    length = module.position.shape[1]
    weights: dict[str, np.ndarray] = {}

    def w(name: str, tensor: torch.Tensor) -> str:
        weights[name] = tensor.detach().numpy().astype(np.float32)
        return name

    q_w, k_w, v_w = attn.in_proj_weight.chunk(3)
    q_b, k_b, v_b = attn.in_proj_bias.chunk(3)
    nodes = [helper.make_node("Gather", [w("embed", module.embed.weight), "tokens"], ["emb"]),
             helper.make_node("Add", ["emb", w("position", module.position)], ["x"])]

    def dense(x: str, weight: torch.Tensor, bias: torch.Tensor, out: str) -> None:
        nodes.extend([helper.make_node("MatMul", [x, w(f"{out}.weight", weight.T)], [f"{out}/mm"]),
                      helper.make_node("Add", [f"{out}/mm", w(f"{out}.bias", bias)], [out])])

    for name, weight, bias in (("q", q_w, q_b), ("k", k_w, k_b), ("v", v_w, v_b)):
        dense("x", weight, bias, name)
    nodes.append(helper.make_node("Attention", ["q", "k", "v"], ["heads"], q_num_heads=heads, kv_num_heads=heads))
    dense("heads", attn.out_proj.weight, attn.out_proj.bias, "attn")
    nodes += [helper.make_node("Add", ["x", "attn"], ["res1"]),
              helper.make_node("LayerNormalization", ["res1", w("norm1.weight", layer.norm1.weight),
                                                      w("norm1.bias", layer.norm1.bias)], ["h1"],
                               epsilon=layer.norm1.eps)]
    dense("h1", layer.linear1.weight, layer.linear1.bias, "ff1")
    nodes.append(helper.make_node("Gelu", ["ff1"], ["ff1/gelu"]))
    dense("ff1/gelu", layer.linear2.weight, layer.linear2.bias, "ff2")
    nodes += [helper.make_node("Add", ["h1", "ff2"], ["res2"]),
              helper.make_node("LayerNormalization", ["res2", w("norm2.weight", layer.norm2.weight),
                                                      w("norm2.bias", layer.norm2.bias)], ["h2"],
                               epsilon=layer.norm2.eps),
              helper.make_node("ReduceMean", ["h2", w("pool_axes", torch.tensor([1]))], ["pooled"], keepdims=0)]
    weights["pool_axes"] = np.array([1], np.int64)
    dense("pooled", module.head.weight, module.head.bias, "logits")
    graph = helper.make_graph(
        nodes, "attention_encoder", [helper.make_tensor_value_info("tokens", TensorProto.INT64, [batch, length])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, module.head.out_features])],
        [numpy_helper.from_array(a, n) for n, a in weights.items()])
    return module, helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
