"""The text models of the zoo (models/text.py): the PyTorch-exported BERT-style encoder and the one written with
the opset-23 Attention op convert with converter_lite, fuse, and match onnxruntime and the PyTorch module."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from converter.load import to_graph
from models.text import attention_encoder, text_encoder
from tests.util import relative_to_range, run_lite, run_ort, session_for

TOKENS = np.random.default_rng(0).integers(0, 64, (4, 16)).astype(np.int64)


@pytest.fixture(scope="module", params=[text_encoder, attention_encoder], ids=["exported", "attention_op"])
def zoo_model(request):
    return request.param()


def test_converts_into_fused_attention_and_layer_norms(zoo_model) -> None:
    module, model = zoo_model
    counts = collections.Counter(n.op for n in to_graph(model).nodes)
    layers = len(module.encoder.layers)
    assert counts["Attention"] == layers and counts["LayerNorm"] == 2 * layers
    assert not {"Softmax", "MatMul", "Erf"} & set(counts)


def test_matches_onnxruntime_and_pytorch(zoo_model) -> None:
    module, model = zoo_model
    ours = run_lite(session_for(model), {"tokens": TOKENS})["logits"]
    expected = run_ort(model, {"tokens": TOKENS})["logits"]
    assert relative_to_range(ours, expected) <= 1e-4
    with torch.no_grad():
        assert relative_to_range(ours, module.eval()(torch.from_numpy(TOKENS)).numpy()) <= 1e-4
