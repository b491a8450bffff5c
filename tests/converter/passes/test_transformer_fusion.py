"""The fusion passes of exported transformer blocks (fuse_attention, fuse_layer_norm, fuse_gelu): each fires on
the pattern PyTorch exports (counted in the converted graph) and the fused model matches onnxruntime running the
unfused export."""
from __future__ import annotations

import collections
import importlib.util
import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper
from torch import nn

import lite
from converter import convert
from converter.load import to_graph
from schema import fb
from tests.util import relative_to_range, run_lite, run_ort, session_for

A = fb.ActivationType
rng = np.random.default_rng(0)


def ops(model: onnx.ModelProto, disabled: tuple[str, ...] = ()) -> collections.Counter:
    graph = to_graph(model, disabled_passes=disabled)
    return collections.Counter((n.op, n.attrs.get("type")) if n.op == "Activation" else n.op for n in graph.nodes)


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    ours, want = run_lite(session_for(model), feeds), run_ort(model, feeds)
    for name, expected in want.items():
        assert relative_to_range(ours[name], expected) <= 1e-5, name


class PaddedEncoder(nn.Module):
    """Two encoder layers reading a key padding mask (bool [N, L], True = padding)."""

    def __init__(self) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        return self.encoder(x, src_key_padding_mask=padding)


@pytest.fixture(scope="module")
def padded_encoder() -> onnx.ModelProto:
    torch.manual_seed(0)
    x, padding = torch.randn(3, 6, 16), torch.zeros(3, 6, dtype=torch.bool)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(PaddedEncoder().eval(), (x, padding), buf, input_names=["x", "padding"],
                          output_names=["y"], opset_version=14, dynamo=False)
    return onnx.load_from_string(buf.getvalue())


def test_exported_encoder_layers_fuse_into_attention_layer_norm_and_gelu(padded_encoder) -> None:
    counts = ops(padded_encoder)
    assert counts["Attention"] == 2 and counts["LayerNorm"] == 4 and counts[("Activation", A.GELU)] == 2
    assert not {"Softmax", "Erf", "Sqrt", "Pow", "MatMul"} & set(counts)


@pytest.mark.parametrize("disabled", [(), ("fuse_attention", "fuse_layer_norm", "fuse_gelu")],
                         ids=["fused", "unfused"])
def test_encoder_with_a_padding_mask_matches_onnxruntime(padded_encoder, disabled: tuple[str, ...]) -> None:
    x = rng.standard_normal((3, 6, 16)).astype(np.float32)
    padding = np.zeros((3, 6), bool)
    padding[1, 4:], padding[2, 1:] = True, True
    graph_ops = ops(padded_encoder, disabled)
    assert (graph_ops["Attention"] == 0) == bool(disabled)
    buf = convert(padded_encoder, disabled_passes=disabled)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    ours = run_lite(session, {"x": x, "padding": padding})["y"]
    assert relative_to_range(ours, run_ort(padded_encoder, {"x": x, "padding": padding})["y"]) <= 1e-5


def test_tanh_gelu_and_decomposed_layer_norm_of_an_mlp_fuse() -> None:
    torch.manual_seed(0)
    module = nn.Sequential(nn.Linear(8, 16), nn.GELU(approximate="tanh"), nn.LayerNorm(16), nn.Linear(16, 4))
    x = torch.randn(5, 8)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), buf, input_names=["x"], output_names=["y"], opset_version=14,
                          dynamo=False)
    model = onnx.load_from_string(buf.getvalue())
    counts = ops(model)
    assert counts[("Activation", A.GELU_TANH)] == 1 and counts["LayerNorm"] == 1
    assert not {"Pow", "Sqrt", "Reduce"} & set(counts) and ("Activation", A.TANH) not in counts
    assert_matches_ort(model, {"x": x.numpy()})


def bert_attention(divide: bool) -> onnx.ModelProto:
    """Hand-written 4-D BERT attention: softmax(q k^T / sqrt(d) + mask) v, the mask [N, 1, 1, T] additive."""
    q, k, v, mask = (helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in
                     (("q", [2, 3, 5, 4]), ("k", [2, 3, 5, 4]), ("v", [2, 3, 5, 6]), ("mask", [2, 1, 1, 5])))
    scale = np.array(2.0 if divide else 0.5, np.float32)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Div" if divide else "Mul", ["s", "c"], ["scaled"]),
             helper.make_node("Add", ["scaled", "mask"], ["biased"]),
             helper.make_node("Softmax", ["biased"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    graph = helper.make_graph(nodes, "bert_attention", [q, k, v, mask],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(scale, "c")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("divide", [True, False], ids=["div", "mul"])
def test_hand_written_bert_attention_fuses_with_its_scale_and_mask(divide: bool) -> None:
    model = bert_attention(divide)
    graph = to_graph(model)
    assert [n.op for n in graph.nodes] == ["Attention"]
    assert graph.nodes[0].attrs["scale"] == pytest.approx(0.5)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in
             (("q", (2, 3, 5, 4)), ("k", (2, 3, 5, 4)), ("v", (2, 3, 5, 6)))}
    feeds["mask"] = np.where(rng.uniform(size=(2, 1, 1, 5)) > 0.3, 0, -1e4).astype(np.float32)
    assert_matches_ort(model, feeds)


def test_softmax_read_twice_is_left_alone() -> None:
    """The probabilities are also a graph output: fusing would lose them."""
    model = bert_attention(True)
    model.graph.output.append(helper.make_tensor_value_info("p", TensorProto.FLOAT, None))
    assert ops(model)["Attention"] == 0


class TinyBert(nn.Module):
    """A BERT-style encoder written as exports with dynamic axes see it: positions sliced to the input's length
    (so every shape after it is known only at run time), heads split off by view + transpose and merged back,
    linear layers with biases, exact GELU, an additive padding mask on the scores, residual sums."""

    def __init__(self, width: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.heads, self.depth = heads, width // heads
        self.words, self.positions = nn.Embedding(50, width), nn.Parameter(torch.randn(16, width) * 0.1)
        self.blocks = nn.ModuleList(nn.ModuleDict({
            "q": nn.Linear(width, width), "k": nn.Linear(width, width), "v": nn.Linear(width, width),
            "o": nn.Linear(width, width), "up": nn.Linear(width, 4 * width), "down": nn.Linear(4 * width, width),
            "norm1": nn.LayerNorm(width), "norm2": nn.LayerNorm(width)}) for _ in range(layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.words(ids) + self.positions[:ids.shape[1]]
        bias = ((1.0 - mask.to(torch.float32)) * -1e4)[:, None, None, :]
        for p in self.blocks:
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, self.heads, -1).transpose(1, 2)        # noqa: E731
            q, k, v = split(p["q"](x)), split(p["k"](x)), split(p["v"](x))
            scores = q @ k.transpose(-1, -2) / self.depth ** 0.5 + bias
            context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1)
            x = p["norm1"](x + p["o"](context))
            x = p["norm2"](x + p["down"](nn.functional.gelu(p["up"](x))))
        return x


def tiny_bert_model() -> onnx.ModelProto:
    """TinyBert exported at opset 17 with dynamic batch and length: inputs ids and mask [batch, tokens] (int64)."""
    torch.manual_seed(0)
    ids = torch.ones(2, 6, dtype=torch.int64)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(TinyBert().eval(), (ids, torch.ones_like(ids)), buf, input_names=["ids", "mask"],
                          output_names=["y"], opset_version=17, dynamo=False,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in ("ids", "mask")})
    return onnx.load_from_string(buf.getvalue())


@pytest.fixture(scope="module")
def tiny_bert() -> onnx.ModelProto:
    return tiny_bert_model()


def bert_feeds(batch: int, tokens: int) -> dict[str, np.ndarray]:
    """Token ids with the later rows padded (mask 0) from a shorter length on."""
    ids = rng.integers(1, 50, (batch, tokens)).astype(np.int64)
    mask = np.ones((batch, tokens), np.int64)
    for row in range(1, batch):
        mask[row, tokens - 2 * row:] = 0
    return {"ids": ids * mask, "mask": mask}


def test_a_dynamic_shape_bert_fuses_into_3d_attention_and_biased_layers(tiny_bert) -> None:
    graph = to_graph(tiny_bert)
    counts = collections.Counter(n.op for n in graph.nodes)
    assert counts["Attention"] == 2 and counts["FullConnection"] == 12 and counts["LayerNorm"] == 4
    assert not {"Softmax", "MatMul", "Transpose", "Reshape", "Concat"} & set(counts)
    assert counts["Add"] <= 1                                # the positions' sum; biases and residuals fused
    attention = [n for n in graph.nodes if n.op == "Attention"]
    assert all(n.attrs["q_num_heads"] == n.attrs["kv_num_heads"] == 4 for n in attention)
    assert all(graph.values[n.inputs[0]].rank == 3 for n in attention)
    fc = [n for n in graph.nodes if n.op == "FullConnection"]
    assert all(len(n.inputs) >= 3 and n.inputs[2] for n in fc)


@pytest.mark.parametrize("kernels", ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(
    importlib.util.find_spec("numba") is None, reason="numba not installed"))])
def test_the_fused_dynamic_shape_bert_matches_onnxruntime_at_two_shapes(tiny_bert, kernels: str) -> None:
    buf = convert(tiny_bert)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2, kernels=kernels))
    attention = [step.kernel for step in session._plan.steps if step.node.op == "Attention"]
    assert len(attention) == 2 and all(getattr(k, "compiled", False) == (kernels == "compiled") for k in attention)
    for batch, tokens in ((2, 7), (3, 9)):
        feeds = bert_feeds(batch, tokens)
        ours = run_lite(session, feeds)["y"]
        assert relative_to_range(ours, run_ort(tiny_bert, feeds)["y"]) <= 1e-5, (batch, tokens)


def test_tanh_gelu_with_the_cube_scaled_first_fuses() -> None:
    """jax2tf's order: 0.044715 * x, times x, times x; then x * (0.5 * (1 + tanh(...)))."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7])
    consts = {"c": 0.044715, "s": np.sqrt(2 / np.pi), "one": 1.0, "half": 0.5}
    nodes = [helper.make_node("Mul", ["c", "x"], ["cx"]), helper.make_node("Mul", ["x", "cx"], ["cx2"]),
             helper.make_node("Mul", ["x", "cx2"], ["cx3"]), helper.make_node("Add", ["x", "cx3"], ["inner"]),
             helper.make_node("Mul", ["s", "inner"], ["scaled"]), helper.make_node("Tanh", ["scaled"], ["t"]),
             helper.make_node("Add", ["one", "t"], ["gate"]), helper.make_node("Mul", ["half", "gate"], ["h"]),
             helper.make_node("Mul", ["x", "h"], ["y"])]
    graph = helper.make_graph(nodes, "gelu", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert ops(model) == {("Activation", A.GELU_TANH): 1}
    assert_matches_ort(model, {"x": 3 * rng.standard_normal((2, 3, 7)).astype(np.float32)})
