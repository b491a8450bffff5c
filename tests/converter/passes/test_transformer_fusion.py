"""The fusion passes of exported transformer blocks (fuse_attention, fuse_layer_norm, fuse_gelu): each fires on
the pattern PyTorch exports (counted in the converted graph) and the fused model matches onnxruntime running the
unfused export."""
from __future__ import annotations

import collections
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
