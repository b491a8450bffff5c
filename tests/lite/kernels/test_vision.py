"""The vision and detection ops against the official node tests, onnxruntime and onnx.reference."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import lite
from converter import convert
from tests.node_cases import frozen, node_cases, run_case
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


# ---- GridSample, AffineGrid ----------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix,keep", [("gridsample", 2), ("affine_grid", 1)])
def test_grid_official_cases(prefix: str, keep: int) -> None:
    for name, model, inputs, expected in node_cases(prefix):
        if not name.endswith("_expanded"):
            np.testing.assert_allclose(run_case(model, inputs, keep)[0], expected[0], rtol=1e-3, atol=1e-4,
                                       err_msg=name)


def _grid_model(x: np.ndarray, grid: np.ndarray, opset: int, **attrs) -> onnx.ModelProto:
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], name="grid_sample", **attrs)
    inputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, a.shape) for n, a in (("x", x), ("grid", grid))]
    graph = helper.make_graph([node], "gs", inputs, [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_grid_sample_matches_onnxruntime(mode: str, padding: str, align: int) -> None:
    feeds = {"x": RNG.standard_normal((2, 3, 5, 6)).astype(np.float32),
             "grid": RNG.uniform(-1.4, 1.4, (2, 4, 7, 2)).astype(np.float32)}
    model = _grid_model(feeds["x"], feeds["grid"], 16, mode=mode, padding_mode=padding, align_corners=align)
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d_matches_onnxruntime(mode: str, padding: str) -> None:
    feeds = {"x": RNG.standard_normal((1, 2, 4, 5, 3)).astype(np.float32),
             "grid": RNG.uniform(-1.2, 1.2, (1, 3, 2, 4, 3)).astype(np.float32)}
    model = _grid_model(feeds["x"], feeds["grid"], 20, mode=mode, padding_mode=padding)
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-5)


def test_grid_sample_unknown_mode_is_an_attribute_error() -> None:
    x, grid = np.zeros((1, 1, 2, 2), np.float32), np.zeros((1, 1, 1, 2), np.float32)
    with pytest.raises(lite.InvalidOpAttrError, match="grid_sample.*mode 'area'"):
        convert(_grid_model(x, grid, 16, mode="area"))


@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("size", [[2, 3, 5, 6], [2, 3, 4, 5, 6]])
def test_affine_grid_matches_onnxruntime(size: list[int], align: int) -> None:
    rank = len(size) - 2
    theta = RNG.standard_normal((2, rank, rank + 1)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align)
    graph = helper.make_graph([node], "ag", [helper.make_tensor_value_info("theta", onnx.TensorProto.FLOAT,
                                                                           theta.shape)],
                              [helper.make_tensor_value_info("grid", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array(size, np.int64), "size")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    feeds = {"theta": theta}
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["grid"], run_ort(model, feeds)["grid"],
                               rtol=1e-5, atol=1e-6)


# ---- RoiAlign, MaxRoiPool ------------------------------------------------------------------------------------
def _rois(count: int, size: float) -> np.ndarray:
    corner = RNG.uniform(-3, size, (count, 2))
    extent = RNG.uniform(0.5, size / 1.5, (count, 2))
    return np.concatenate([corner, corner + extent], axis=1).astype(np.float32)


def _roi_model(op: str, inputs: dict[str, np.ndarray], opset: int, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, list(inputs), ["y"], name=op.lower(), **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                         a.shape) for n, a in inputs.items()],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_roi_align_official_cases() -> None:
    for name, model, inputs, expected in node_cases("roialign"):
        np.testing.assert_allclose(run_case(model, inputs, 3)[0], expected[0], rtol=1e-3, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("opset,transform", [(10, None), (16, "half_pixel"), (16, "output_half_pixel")])
@pytest.mark.parametrize("mode,sampling_ratio", [("avg", 0), ("avg", 2), ("max", 0), ("max", 3)])
def test_roi_align_matches_onnxruntime(mode: str, sampling_ratio: int, opset: int, transform: str | None) -> None:
    feeds = {"x": RNG.standard_normal((2, 3, 12, 10)).astype(np.float32), "rois": _rois(6, 16),
             "batch": RNG.integers(0, 2, 6).astype(np.int64)}
    attrs = dict(mode=mode, sampling_ratio=sampling_ratio, output_height=3, output_width=4, spatial_scale=0.7)
    if transform:
        attrs["coordinate_transformation_mode"] = transform
    model = _roi_model("RoiAlign", feeds, opset, **attrs)
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-5)


def test_max_roi_pool_matches_onnxruntime() -> None:
    rois = _rois(7, 14)
    feeds = {"x": RNG.standard_normal((2, 3, 11, 9)).astype(np.float32),
             "rois": np.concatenate([RNG.integers(0, 2, (7, 1)), rois], axis=1).astype(np.float32)}
    model = _roi_model("MaxRoiPool", feeds, 13, pooled_shape=[3, 2], spatial_scale=0.6)
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=0, atol=0)


def test_roi_align_batch_index_out_of_range_names_the_node() -> None:
    x = np.zeros((1, 1, 4, 4), np.float32)
    node = helper.make_node("RoiAlign", ["x", "rois", "batch"], ["y"], name="align")
    graph = helper.make_graph([node], "ra", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.zeros((1, 4), np.float32), "rois"),
                               numpy_helper.from_array(np.array([3], np.int64), "batch")])
    with pytest.raises(lite.InferShapeError, match="align.*batch_indices"):
        convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]))


# ---- MaxUnpool -----------------------------------------------------------------------------------------------
def test_max_unpool_official_case_without_output_shape() -> None:
    (_, model, inputs, expected), = node_cases("maxunpool_export_without_output_shape")
    np.testing.assert_array_equal(run_case(model, inputs, 2)[0], expected[0])


@pytest.mark.parametrize("x_shape,attrs,output_shape", [
    ((2, 3, 8, 6), dict(kernel_shape=[2, 2], strides=[2, 2]), None),
    ((2, 3, 9, 8), dict(kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1]), [2, 3, 9, 8])])
def test_max_pool_then_unpool_matches_onnxruntime(x_shape: tuple[int, ...], attrs: dict,
                                                  output_shape: list[int] | None) -> None:
    nodes = [helper.make_node("MaxPool", ["x"], ["pooled", "indices"], **attrs),
             helper.make_node("MaxUnpool", ["pooled", "indices"] + (["shape"] if output_shape else []), ["y"],
                              **attrs)]
    inits = [numpy_helper.from_array(np.array(output_shape, np.int64), "shape")] if output_shape else []
    graph = helper.make_graph(nodes, "unpool", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)])
    feeds = {"x": RNG.standard_normal(x_shape).astype(np.float32)}
    np.testing.assert_array_equal(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"])


def test_max_unpool_index_out_of_range_names_the_node() -> None:
    node = helper.make_node("MaxUnpool", ["x", "i"], ["y"], name="unpool", kernel_shape=[2, 2], strides=[2, 2])
    graph = helper.make_graph([node], "u", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 2, 2])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.array([[[[0, 1], [2, 16]]]], np.int64), "i")])
    with pytest.raises(lite.InferShapeError, match="unpool.*indices must lie in"):
        convert(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)]))


# ---- DeformConv ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("prefix", ["basic_deform_conv", "deform_conv"])
def test_deform_conv_official_cases(prefix: str) -> None:
    for name, model, inputs, expected in node_cases(prefix):
        np.testing.assert_allclose(run_case(model, inputs, len(inputs))[0], expected[0], rtol=1e-5, atol=1e-5,
                                   err_msg=name)


DEFORM_CASES = {
    "plain": dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "strided_dilated_groups": dict(kernel_shape=[3, 2], strides=[2, 1], dilations=[1, 2], pads=[1, 0, 1, 1],
                                   group=2, offset_group=2),
}


@pytest.mark.parametrize("with_mask", [False, True])
@pytest.mark.parametrize("case", DEFORM_CASES)
def test_deform_conv_matches_onnxruntime(case: str, with_mask: bool) -> None:
    attrs = DEFORM_CASES[case]
    group, offset_group = attrs.get("group", 1), attrs.get("offset_group", 1)
    kh, kw = attrs["kernel_shape"]
    x = RNG.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = RNG.standard_normal((6, 4 // group, kh, kw)).astype(np.float32)
    probe = onnx.shape_inference.infer_shapes(_roi_model("Conv", {"x": x, "w": w}, 19, **{
        k: v for k, v in attrs.items() if k != "offset_group"}))
    oh, ow = (d.dim_value for d in probe.graph.output[0].type.tensor_type.shape.dim[2:])
    feeds = {"x": x, "w": w, "offset": RNG.uniform(-2, 2, (2, offset_group * kh * kw * 2, oh, ow)).astype(np.float32),
             "b": RNG.standard_normal(6).astype(np.float32)}
    if with_mask:
        feeds["mask"] = RNG.uniform(0, 1, (2, offset_group * kh * kw, oh, ow)).astype(np.float32)
    model = _roi_model("DeformConv", feeds, 19, **attrs)
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-4)


# ---- Resize: antialias, tf_crop_and_resize -------------------------------------------------------------------
def test_resize_antialias_and_crop_official_cases() -> None:
    for name, model, inputs, expected in node_cases("resize"):
        if "antialias" in name or "tf_crop_and_resize" in name:
            np.testing.assert_allclose(run_case(model, inputs, 1)[0], expected[0], rtol=1e-5, atol=1e-5,
                                       err_msg=name)


def _resize_model(x_shape: tuple[int, ...], consts: dict[str, np.ndarray], **attrs) -> onnx.ModelProto:
    node = helper.make_node("Resize", ["x", *consts], ["y"], name="resize", **attrs)
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(a, n) for n, a in consts.items() if n])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])   # "" = an omitted input


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [(0.4, 0.6), (0.25, 1.5)])
def test_resize_antialias_matches_onnxruntime(mode: str, scales: tuple[float, float]) -> None:
    consts = {"": None, "scales": np.array([1, 1, *scales], np.float32)}
    model = _resize_model((2, 3, 17, 11), consts, mode=mode, antialias=1)
    feeds = {"x": RNG.standard_normal((2, 3, 17, 11)).astype(np.float32)}
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_matches_onnxruntime(mode: str) -> None:
    consts = {"roi": np.array([0, 0, -0.2, 0.3, 1, 1, 0.7, 1.4], np.float32),
              "": None, "sizes": np.array([2, 3, 6, 7], np.int64)}
    model = _resize_model((2, 3, 9, 8), consts, mode=mode, coordinate_transformation_mode="tf_crop_and_resize",
                          extrapolation_value=-3.5)
    feeds = {"x": RNG.standard_normal((2, 3, 9, 8)).astype(np.float32)}
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                               atol=1e-5)
