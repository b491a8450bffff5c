"""The vision and detection ops against the official node tests, onnxruntime and onnx.reference."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import lite
from converter import convert
from tests.node_cases import frozen, node_cases
from tests.util import run_lite, run_ort, session_for

RNG = np.random.default_rng(99)


def run_frozen(model: onnx.ModelProto) -> list[np.ndarray]:
    """Outputs of a model without graph inputs (everything folds at conversion), in graph order."""
    session = session_for(model)
    outputs = run_lite(session, {})
    return [outputs[o.name] for o in model.graph.output]


# ---- NonMaxSuppression ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(node_cases("nonmaxsuppression")), ids=lambda c: c[0])
def test_nms_official_cases_with_constant_inputs(case) -> None:
    _, model, inputs, expected = case
    np.testing.assert_array_equal(run_frozen(frozen(model, inputs))[0], expected[0])


def _nms_model(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou: float, score: float | None,
               opset: int = 11, **attrs) -> onnx.ModelProto:
    consts = {"boxes": boxes, "scores": scores, "max_out": np.array([max_out], np.int64),
              "iou": np.array([iou], np.float32)}
    if score is not None:
        consts["score"] = np.array([score], np.float32)
    node = helper.make_node("NonMaxSuppression", list(consts), ["selected"], name="nms", **attrs)
    graph = helper.make_graph([node], "nms", [], [helper.make_tensor_value_info("selected", onnx.TensorProto.INT64,
                                                                               None)],
                              [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _random_boxes(batches: int, n: int, center: bool) -> np.ndarray:
    centre = RNG.uniform(0, 10, (batches, n, 2))
    size = RNG.uniform(0.5, 4, (batches, n, 2))
    if center:
        return np.concatenate([centre, size], axis=2).astype(np.float32)
    corners = np.concatenate([centre - size / 2, centre + size / 2], axis=2)[..., [1, 0, 3, 2]]
    flip = RNG.random((batches, n)) < 0.3                  # some boxes give their corners in the other order
    corners[flip] = corners[flip][:, [2, 3, 0, 1]]
    return corners.astype(np.float32)


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("opset", [10, 11])
def test_nms_random_boxes_match_onnxruntime_and_reference(center: int, opset: int) -> None:
    boxes = _random_boxes(2, 60, bool(center))
    scores = RNG.random((2, 3, 60)).astype(np.float32)
    model = _nms_model(boxes, scores, 7, 0.3, 0.2, opset, center_point_box=center)
    want = run_ort(model, {})["selected"]
    np.testing.assert_array_equal(ReferenceEvaluator(model).run(None, {})[0], want)
    np.testing.assert_array_equal(run_frozen(model)[0], want)


def test_nms_without_score_threshold_or_box_limit() -> None:
    boxes, scores = _random_boxes(1, 40, False), RNG.random((1, 2, 40)).astype(np.float32)
    for max_out in (0, 1000):
        model = _nms_model(boxes, scores, max_out, 0.5, None)
        np.testing.assert_array_equal(run_frozen(model)[0], run_ort(model, {})["selected"])


def test_nms_iou_threshold_out_of_range_is_an_attribute_error() -> None:
    model = _nms_model(_random_boxes(1, 4, False), RNG.random((1, 1, 4)).astype(np.float32), 2, 1.5, None)
    with pytest.raises(lite.InvalidOpAttrError, match="nms.*iou_threshold") as e:
        convert(model)
    assert e.value.status == lite.RET_INVALID_OP_ATTR


def test_nms_bad_center_point_box_is_an_attribute_error() -> None:
    model = _nms_model(_random_boxes(1, 4, False), RNG.random((1, 1, 4)).astype(np.float32), 2, 0.5, None,
                       center_point_box=2)
    with pytest.raises(lite.InvalidOpAttrError, match="nms.*center_point_box"):
        convert(model)


def test_nms_mismatched_scores_name_the_node() -> None:
    model = _nms_model(_random_boxes(1, 4, False), RNG.random((1, 1, 5)).astype(np.float32), 2, 0.5, None)
    with pytest.raises(lite.InferShapeError, match="nms.*scores must be"):
        convert(model)
