"""Every zoo network and the real EfficientNet-Lite0 convert and match onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import models
from tests.photos import PHOTOS, imagenet_input, load_photo
from tests.util import EFFICIENTNET, relative_to_range, run_lite, run_ort, session_for

TOLERANCE = 1e-4     # of the output's range

SIZES = {"lenet5": (1, 32), "alexnet": (3, 64)}


@pytest.mark.parametrize("name", sorted(models.ZOO))
@pytest.mark.parametrize("batch", [1, 4])
def test_zoo_model_matches_onnxruntime(name: str, batch: int) -> None:
    channels, size = SIZES.get(name, (3, 32))
    model = models.build(name, num_classes=10, input_size=size, batch=None)
    x = np.random.default_rng(batch).standard_normal((batch, channels, size, size)).astype(np.float32)
    got = run_lite(session_for(model), {"input": x})["logits"]
    want = run_ort(model, {"input": x})["logits"]
    assert got.shape == want.shape
    assert relative_to_range(got, want) <= TOLERANCE


@pytest.mark.parametrize("name", ["resnet50", "mobilenet_v2"])
def test_full_size_model_matches_onnxruntime(name: str) -> None:
    model = models.build(name, num_classes=1000, input_size=224)
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    got = run_lite(session_for(model), {"input": x})["logits"]
    assert relative_to_range(got, run_ort(model, {"input": x})["logits"]) <= TOLERANCE


needs_efficientnet = pytest.mark.skipif(not EFFICIENTNET.exists(),
                                        reason="the real EfficientNet-Lite0 lives in ../shared/models")


@pytest.fixture(scope="module")
def efficientnet():
    model = onnx.load(str(EFFICIENTNET))
    return model, session_for(model)


@needs_efficientnet
@pytest.mark.shared_data
def test_real_efficientnet_matches_onnxruntime_on_photos(efficientnet) -> None:
    model, session = efficientnet
    for name in PHOTOS:
        x = imagenet_input(load_photo(name))
        got = run_lite(session, {"input": x})["logits"]
        want = run_ort(model, {"input": x})["logits"]
        assert relative_to_range(got, want) <= TOLERANCE, name
        assert got.argmax() == want.argmax(), name


@needs_efficientnet
@pytest.mark.shared_data
def test_real_efficientnet_knows_the_cat(efficientnet) -> None:
    _, session = efficientnet
    assert run_lite(session, {"input": imagenet_input(load_photo("chelsea"))})["logits"].argmax() == 285  # Egyptian cat


@needs_efficientnet
@pytest.mark.shared_data
def test_real_efficientnet_shape_subgraphs_are_folded(efficientnet) -> None:
    from converter import to_graph
    model, _ = efficientnet
    ops = {n.op for n in to_graph(model).nodes}
    assert not ops & {"Shape", "ConstantOfShape", "Cast", "Slice", "Concat", "Gather"}
