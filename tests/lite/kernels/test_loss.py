"""Losses (NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss) and DynamicQuantizeLinear: importer rules +
kernels against onnxruntime and onnx.reference, and the bad-input contract."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from onnx import helper

from converter import convert
from lite.status import InvalidOpAttrError, OpExecuteError
from tests.lite.kernels.test_elementwise import model_of
from tests.util import assert_matches_oracles, run_lite, session_for

rng = np.random.default_rng(0)


def loss_model(op: str, feeds: dict[str, np.ndarray], outputs: dict[str, np.dtype], **attrs) -> onnx.ModelProto:
    return model_of([helper.make_node(op, list(feeds), list(outputs), name="loss", **attrs)], feeds, outputs,
                    opset=13)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore", [None, 1, -1])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("shape", [(4, 5), (3, 5, 2, 3)], ids=str)
def test_nll_loss(shape: tuple, reduction: str, ignore: int | None, weighted: bool) -> None:
    x = np.log(rng.dirichlet(np.ones(shape[1]), (shape[0], *shape[2:]))).astype(np.float32)
    x = np.moveaxis(x, -1, 1).copy()
    target = rng.integers(0, shape[1], (shape[0], *shape[2:])).astype(np.int64)
    if ignore is not None:
        target.reshape(-1)[::3] = ignore
    feeds = {"x": x, "t": target} | ({"w": rng.uniform(0.5, 2, shape[1]).astype(np.float32)} if weighted else {})
    attrs = {"reduction": reduction} | ({} if ignore is None else {"ignore_index": ignore})
    # onnx.reference averages over the ignored targets too when ignore_index is -1 and there are no weights
    reference_bug = ignore == -1 and not weighted and reduction == "mean"
    oracles = ("onnxruntime",) if reference_bug else ("onnxruntime", "reference")
    assert_matches_oracles(loss_model("NegativeLogLikelihoodLoss", feeds, {"y": np.float32}, **attrs), feeds,
                           oracles=oracles)


@pytest.mark.parametrize("log_prob", [False, True])
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_softmax_cross_entropy_loss(reduction: str, log_prob: bool) -> None:
    x = (rng.standard_normal((4, 5, 3)) * 3).astype(np.float32)
    target = rng.integers(0, 5, (4, 3)).astype(np.int64)
    target[0, 0] = 2
    feeds = {"x": x, "t": target, "w": rng.uniform(0.5, 2, 5).astype(np.float32)}
    outputs = {"y": np.float32} | ({"log_prob": np.float32} if log_prob else {})
    model = loss_model("SoftmaxCrossEntropyLoss", feeds, outputs, reduction=reduction, ignore_index=2)
    assert_matches_oracles(model, feeds, rtol=1e-5, atol=1e-6)


def test_nll_loss_target_out_of_range_names_the_node() -> None:
    feeds = {"x": np.zeros((2, 3), np.float32), "t": np.array([0, 3], np.int64)}
    session = session_for(loss_model("NegativeLogLikelihoodLoss", feeds, {"y": np.float32}))
    with pytest.raises(OpExecuteError, match="loss.*outside \\[0, 3\\)"):
        run_lite(session, feeds)


def test_loss_reduction_must_be_known() -> None:
    feeds = {"x": np.zeros((2, 3), np.float32), "t": np.array([0, 1], np.int64)}
    with pytest.raises(InvalidOpAttrError, match="loss.*reduction 'average'"):
        convert(loss_model("NegativeLogLikelihoodLoss", feeds, {"y": np.float32}, reduction="average"))


@pytest.mark.parametrize("low, high", [(-3.0, 5.0), (1.0, 4.0), (-6.0, -1.0), (0.0, 0.0)])
def test_dynamic_quantize_linear(low: float, high: float) -> None:
    x = rng.uniform(low, high, (3, 4, 5)).astype(np.float32)
    x.reshape(-1)[:2] = [low, high]
    feeds = {"x": x}
    model = loss_model("DynamicQuantizeLinear", feeds, {"y": np.uint8, "scale": np.float32, "zero_point": np.uint8})
    # an all-zero tensor: onnx.reference (the ONNX definition) takes the range as 1, so scale 1/255;
    # onnxruntime returns scale 1
    oracles = ("reference",) if low == high == 0 else ("onnxruntime", "reference")
    assert_matches_oracles(model, feeds, oracles=oracles)
