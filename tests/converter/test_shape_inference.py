"""Shape inference never folds a value computed from an unknown input dim: a BERT-style encoder with dynamic batch
and sequence length (`position[:, :L]` of a 16-row table) converts without --inputShape and runs at any length
within its table as onnxruntime does; a size seen before is not re-planned."""
from __future__ import annotations

import io
import warnings

import numpy as np
import onnx
import pytest
import torch
from torch import nn
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from models.text import OPSET
from tests.converter.frontends.onnx.test_unknown_input_dims import plans  # noqa: F401  (the fixture)
from tests.util import run_ort


class BertStyleEncoder(nn.Module):
    """Token embeddings + learned positions (a 16-row table sliced to the sequence length), one post-norm
    self-attention block with a GELU feed-forward, mean over tokens -> logits; written with reshapes by the
    input's own sizes, so the export keeps batch and length symbolic (nn.MultiheadAttention's export fixes the
    length it was traced at)."""

    def __init__(self, vocab: int = 64, length: int = 16, width: int = 32, heads: int = 4, classes: int = 3):
        super().__init__()
        self.heads = heads
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(1, length, width) * 0.1)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.ff = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
        self.head = nn.Linear(width, classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.position[:, :tokens.shape[1]]
        n, length, width = x.shape
        q, k, v = (t.reshape(n, length, self.heads, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        attention = torch.softmax(q @ k.transpose(-1, -2) / (width // self.heads) ** 0.5, dim=-1)
        x = self.norm1(x + self.out((attention @ v).transpose(1, 2).reshape(n, length, width)))
        return self.head(self.norm2(x + self.ff(x)).mean(dim=1))


def dynamic_text_encoder() -> onnx.ModelProto:
    """The encoder exported with symbolic `batch` and `seq` axes."""
    torch.manual_seed(0)
    buf = io.BytesIO()
    with warnings.catch_warnings():      # the TorchScript exporter warns that it is deprecated
        warnings.simplefilter("ignore")
        torch.onnx.export(BertStyleEncoder().eval(), (torch.zeros(2, 16, dtype=torch.int64),), buf,
                          input_names=["tokens"], output_names=["logits"], opset_version=OPSET, dynamo=False,
                          do_constant_folding=False,
                          dynamic_axes={"tokens": {0: "batch", 1: "seq"}, "logits": {0: "batch"}})
    return onnx.load_from_string(buf.getvalue())


def test_text_encoder_with_dynamic_batch_and_length_runs_at_three_sizes(plans):
    model = dynamic_text_encoder()
    buf = convert(model)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    before = len(plans)
    rng = np.random.default_rng(0)
    for shape in [(1, 8), (2, 16), (3, 5), (1, 8)]:
        tokens = rng.integers(0, 64, shape).astype(np.int64)
        session.GetInputs()[0].set_data(tokens)
        session.RunGraph()
        got = session.GetOutputByTensorName("logits").numpy()
        want = run_ort(model, {"tokens": tokens})["logits"]
        assert got.shape == want.shape == (shape[0], 3)
        np.testing.assert_allclose(got, want, atol=1e-4)
    assert len(plans) - before == 3      # (1, 8) again reuses its plan


def sliced_table_model() -> onnx.ModelProto:
    """y = table[:L] + x for x [L, 4] and a 16-row table: the Slice end is Shape(x)[0], which the stand-in sizes
    clip to the same 16 rows."""
    table = numpy_helper.from_array(np.arange(64, dtype=np.float32).reshape(16, 4), "table")
    ints = [numpy_helper.from_array(np.array([v], np.int64), n) for v, n in ((0, "zero"), (1, "one"))]
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "zero", "one"], ["length"]),
             helper.make_node("Slice", ["table", "zero", "length", "zero"], ["rows"]),
             helper.make_node("Add", ["rows", "x"], ["y"])]
    graph = helper.make_graph(nodes, "sliced", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["L", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["L", 4])],
                              [table, *ints])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("length", [1, 5, 16])
def test_a_slice_by_an_unknown_dim_is_not_folded(length):
    model = sliced_table_model()
    buf = convert(model)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    x = np.random.default_rng(length).standard_normal((length, 4)).astype(np.float32)
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    np.testing.assert_array_equal(session.GetOutputByTensorName("y").numpy(), run_ort(model, {"x": x})["y"])


def test_a_static_model_still_folds_its_shape_computations():
    """With every dim known the same Slice is a constant: the converted graph keeps only the Add."""
    model = sliced_table_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 5
    model = lite.Model.Import(convert(model))
    assert [n.op for n in model.nodes] == ["Add"]
