"""Tensor-manipulation ops (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice, Gather, Pad,
Resize / Upsample, Dropout, Identity, Constant, ConstantOfShape, Shape, Cast), each converted from a small ONNX
model and run by our runtime, checked against onnxruntime (or the official ONNX node-test outputs)."""
from __future__ import annotations

import numpy as np
import onnx
import onnx.utils
import pytest
from onnx import TensorProto, helper, numpy_helper, shape_inference
from onnx.backend.test.loader import load_model_tests
from onnx.reference import ReferenceEvaluator

import lite
from converter import convert, to_graph
from lite.compiler import compile_graph
from lite.status import LiteError, NotSupportedError
from tests.util import EFFICIENTNET, run_ort, session_for

F, I64 = TensorProto.FLOAT, TensorProto.INT64
INT64_MAX, INT64_MIN = np.iinfo(np.int64).max, np.iinfo(np.int64).min
RNG = np.random.default_rng(0)


# ---- helpers ---------------------------------------------------------------------------------------------------
def model(nodes: list[onnx.NodeProto], inputs: dict[str, tuple[int, list]], outputs: dict[str, int],
          opset: int, consts: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """A one-graph model: `inputs` name -> (elem type, shape), `outputs` name -> elem type (shape inferred),
    `consts` become initializers."""
    graph = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in (consts or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def unary(op: str, opset: int, shape: list[int], consts: dict[str, np.ndarray] | None = None,
          params: list[str] = (), outputs: int = 1, out_type: int = F, in_type: int = F,
          **attrs) -> onnx.ModelProto:
    """`op(x, *params)` with `outputs` outputs y0, y1, ..."""
    names = [f"y{k}" for k in range(outputs)]
    node = helper.make_node(op, ["x", *params], names, **attrs)
    return model([node], {"x": (in_type, shape)}, {n: out_type for n in names}, opset, consts)


def optional_params(values: dict[str, np.ndarray | None]) -> tuple[dict[str, np.ndarray], list[str]]:
    """(initializers, input names) of parameter inputs in order; None marks an omitted input."""
    names = [n if v is not None else "" for n, v in values.items()]
    while names and not names[-1]:
        names.pop()
    return {n: v for n, v in values.items() if v is not None}, names


def random(shape: list[int], dtype: type = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-50, 50, shape).astype(dtype)


def run_ours(session: lite.LiteSession, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Resize the inputs to their feeds' shapes at once (Resize resets input data), fill them, run."""
    tensors = [session.GetInputsByTensorName(n) for n in feeds]
    if any(t.shape() != list(a.shape) for t, a in zip(tensors, feeds.values())):
        session.Resize(tensors, [list(a.shape) for a in feeds.values()])
    for tensor, array in zip(tensors, feeds.values()):
        tensor.set_data(array)
    session.RunGraph()
    return {name: t.numpy() for name, t in session.GetOutputs().items()}


def assert_like_ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    """Convert and run `m`, and compare every output with onnxruntime's."""
    ours, expected = run_ours(session_for(m), feeds), run_ort(m, feeds)
    assert list(ours) == list(expected)
    for name in expected:
        assert ours[name].dtype == expected[name].dtype and ours[name].shape == expected[name].shape, name
        np.testing.assert_allclose(ours[name], expected[name], rtol=1e-5, atol=1e-5, err_msg=name)


# ---- Reshape, Flatten, Squeeze, Unsqueeze, Transpose ------------------------------------------------------------
@pytest.mark.parametrize("shape, allowzero", [([0, -1], 0), ([3, 0, 2], 0), ([-1], 0), ([2, 1, 2, 3, 1], 1),
                                              ([4, -1, 3], 0)])
def test_reshape(shape, allowzero):
    m = unary("Reshape", 14, [2, 2, 3], {"s": np.array(shape, np.int64)}, ["s"], allowzero=allowzero)
    assert_like_ort(m, {"x": random([2, 2, 3])})


def test_reshape_writes_into_its_input_buffer_when_the_input_dies():
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["t", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["y0"], perm=[1, 0])]
    m = model(nodes, {"x": (F, [2, 3, 4])}, {"y0": F}, 13, {"s": np.array([6, 4], np.int64)})
    buf = convert(m, disabled_passes=["to_nhwc"])
    lite_model = lite.Model.Import(buf)
    plan = compile_graph(lite_model, {lite_model.inputs[0]: (2, 3, 4)})
    step = next(st for st in plan.steps if st.node.op == "Reshape")
    assert np.shares_memory(step.inputs[0], step.outputs[0])
    assert_like_ort(m, {"x": random([2, 3, 4])})


@pytest.mark.parametrize("axis", [0, 1, 2, 4, -1, -3])
def test_flatten(axis):
    assert_like_ort(unary("Flatten", 13, [2, 3, 4, 5], axis=axis), {"x": random([2, 3, 4, 5])})


@pytest.mark.parametrize("opset, axes", [(11, [1, -1]), (13, [1, -1]), (13, None), (11, None)])
def test_squeeze(opset, axes):
    if opset >= 13 and axes is not None:
        m = unary("Squeeze", opset, [2, 1, 3, 1], {"a": np.array(axes, np.int64)}, ["a"])
    else:
        m = unary("Squeeze", opset, [2, 1, 3, 1], **({"axes": axes} if axes else {}))
    assert_like_ort(m, {"x": random([2, 1, 3, 1])})


@pytest.mark.parametrize("opset, axes", [(11, [0, 3]), (13, [-1, 0]), (13, [3, 1])])
def test_unsqueeze(opset, axes):
    m = (unary("Unsqueeze", opset, [2, 3], {"a": np.array(axes, np.int64)}, ["a"]) if opset >= 13
         else unary("Unsqueeze", opset, [2, 3], axes=axes))
    assert_like_ort(m, {"x": random([2, 3])})


@pytest.mark.parametrize("shape, perm", [([2, 3, 4, 5], None), ([2, 3, 4, 5], [0, 2, 3, 1]),
                                         ([2, 3, 4, 5], [3, 1, 0, 2]), ([2, 3, 12, 16], [0, 3, 1, 2]),
                                         ([2, 9, 5, 7], [0, 2, 3, 1]), ([4, 1, 3], [1, 2, 0])])
def test_transpose(shape, perm):
    """Short innermost output axes (copied index by index) and long ones (one copy)."""
    m = unary("Transpose", 13, shape, **({"perm": perm} if perm else {}))
    assert_like_ort(m, {"x": random(shape)})


# ---- Concat, Split, Slice, Gather ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis, dtype", [(1, np.float32), (-1, np.float32), (0, np.int64)])
def test_concat(axis, dtype):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    shapes = {"a": [2, 3, 4], "b": [2, 3, 4], "c": [2, 3, 4]}
    shapes["b"][axis] = 1
    node = helper.make_node("Concat", list(shapes), ["y"], axis=axis)
    m = model([node], {n: (elem, s) for n, s in shapes.items()}, {"y": elem}, 13)
    assert_like_ort(m, {n: random(s, dtype) for n, s in shapes.items()})


@pytest.mark.parametrize("opset, split, outputs, axis", [(11, [1, 4], 2, 1), (13, [2, 0, 5], 3, -1),
                                                         (13, None, 5, 1), (18, None, 2, 1), (18, None, 3, 2)])
def test_split(opset, split, outputs, axis):
    attrs = {"axis": axis}
    consts, params = {}, []
    if split is not None and opset >= 13:
        consts, params = {"s": np.array(split, np.int64)}, ["s"]
    elif split is not None:
        attrs["split"] = split
    if opset >= 18 and split is None:
        attrs["num_outputs"] = outputs
    m = unary("Split", opset, [2, 5, 7], consts, params, outputs=outputs, **attrs)
    assert_like_ort(m, {"x": random([2, 5, 7])})


def test_slice_attributes_before_opset_10():
    m = unary("Slice", 9, [4, 5, 6], starts=[1, -4], ends=[1000, -1], axes=[0, 2])
    assert_like_ort(m, {"x": random([4, 5, 6])})


@pytest.mark.parametrize("starts, ends, axes, steps", [
    ([1, 0], [3, 5], None, None),
    ([-1, 4], [INT64_MIN, 0], [0, -1], [-1, -2]),            # negative steps down to the sentinel
    ([0, -100], [INT64_MAX, 100], [2, 1], [2, 1]),           # clamping and INT64_MAX
    ([10], [20], [1], [1]),                                  # empty result
    ([5], [-7], [2], [-3]),
])
def test_slice_inputs(starts, ends, axes, steps):
    consts, params = optional_params({k: None if v is None else np.array(v, np.int64)
                                      for k, v in (("s", starts), ("e", ends), ("a", axes), ("st", steps))})
    m = unary("Slice", 13, [4, 5, 6], consts, params)
    assert_like_ort(m, {"x": random([4, 5, 6])})


@pytest.mark.parametrize("indices, axis", [(np.array([0, -1, 2]), 0), (np.array([[1, -2], [0, 3]]), 1),
                                           (np.array(-1), 2), (np.array([2], np.int32), -1)])
def test_gather_constant_indices(indices, axis):
    m = unary("Gather", 13, [4, 5, 6], {"i": indices}, ["i"], axis=axis)
    assert_like_ort(m, {"x": random([4, 5, 6])})


def test_gather_indices_given_at_run_time():
    node = helper.make_node("Gather", ["x", "i"], ["y"], axis=1)
    m = model([node], {"x": (F, [3, 5]), "i": (I64, [4])}, {"y": F}, 13)
    assert_like_ort(m, {"x": random([3, 5]), "i": np.array([4, -5, 0, -1], np.int64)})


def test_gather_rejects_out_of_range_constant_indices():
    m = unary("Gather", 13, [4, 5], {"i": np.array([0, 5])}, ["i"], axis=1)
    with pytest.raises(LiteError, match="out of range"):
        convert(m)


# ---- Pad --------------------------------------------------------------------------------------------------------
def test_pad_attributes_before_opset_11():
    m = unary("Pad", 10, [1, 2, 3, 4], pads=[0, 0, 1, 2, 0, 1, 0, 3], value=1.5)
    assert_like_ort(m, {"x": random([1, 2, 3, 4])})


@pytest.mark.parametrize("mode, pads", [("constant", [0, 1, 2, 0, 0, 2, 1, 1]), ("reflect", [0, 0, 2, 1, 0, 0, 1, 2]),
                                        ("edge", [0, 1, 3, 2, 0, 0, 1, 4]), ("constant", [0, 0, -1, 2, 0, 0, 1, -2]),
                                        ("edge", [0, 0, -1, 2, 0, 1, 2, -1]), ("reflect", [0, 1, -1, 2, 0, 0, 2, -2])])
def test_pad_inputs(mode, pads):
    m = unary("Pad", 13, [1, 2, 4, 5], {"p": np.array(pads, np.int64), "v": np.array(-2.0, np.float32)},
              ["p", "v"] if mode == "constant" else ["p"], mode=mode)
    assert_like_ort(m, {"x": random([1, 2, 4, 5])})


@pytest.mark.parametrize("pads", [[0, 2, 3, 0, 1, 2], [1, 0, -1, 0, 5, 6]])
def test_pad_wrap_opset_19(pads):
    m = unary("Pad", 19, [2, 3, 4], {"p": np.array(pads, np.int64)}, ["p"], mode="wrap")
    assert_like_ort(m, {"x": random([2, 3, 4])})


def test_pad_axes_input_opset_18():
    m = unary("Pad", 18, [2, 3, 4], {"p": np.array([1, 2, 3, 0], np.int64), "v": np.array(7, np.int64),
                                     "a": np.array([-1, 0], np.int64)}, ["p", "v", "a"], in_type=I64,
              out_type=I64)
    assert_like_ort(m, {"x": random([2, 3, 4], np.int64)})


# ---- Resize / Upsample ------------------------------------------------------------------------------------------
def resize_model(opset: int, shape: list[int], scales: list[float] | None = None, sizes: list[int] | None = None,
                 **attrs) -> onnx.ModelProto:
    """Resize of opset `opset` with constant scales or sizes (opset 11-12 need an empty scales with sizes)."""
    empty = np.zeros(0, np.float32)
    scales = np.array(scales, np.float32) if scales is not None else empty if opset < 13 else None
    values = {"scales": scales}
    if opset >= 11:
        values = {"roi": empty, "scales": scales, "sizes": None if sizes is None else np.array(sizes, np.int64)}
    consts, params = optional_params(values)
    return unary("Resize", opset, shape, consts, params, **attrs)


@pytest.mark.parametrize("mode, scales", [("nearest", [1, 1, 2, 3]), ("nearest", [1, 1, 0.5, 0.4]),
                                          ("linear", [1, 1, 2, 1.5])])
def test_resize_opset_10(mode, scales):
    assert_like_ort(resize_model(10, [1, 2, 4, 5], scales, mode=mode), {"x": random([1, 2, 4, 5])})


TRANSFORMS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"]


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("rounding", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("sizes", [[1, 2, 7, 13], [1, 2, 3, 2]])
def test_resize_nearest(transform, rounding, sizes):
    m = resize_model(13, [1, 2, 5, 6], sizes=sizes, mode="nearest", coordinate_transformation_mode=transform,
                     nearest_mode=rounding)
    assert_like_ort(m, {"x": random([1, 2, 5, 6])})


# align_corners with a fractional scale * length is left out: onnxruntime and the ONNX reference disagree there
# (we follow the reference; the official test_resize_downsample_scales_linear_align_corners checks it below).
@pytest.mark.parametrize("transform, scales", [
    (t, s) for t in TRANSFORMS[:4] + ["half_pixel_symmetric"]
    for s in ([1, 1, 2, 2], [1, 1, 0.6, 1.5], [1, 3, 1, 1], [1, 1, 0.5, 1.7])
    if not (t == "align_corners" and s[3] == 1.7)])
def test_resize_linear(transform, scales):
    m = resize_model(19, [2, 3, 5, 4], scales, mode="linear", coordinate_transformation_mode=transform)
    assert_like_ort(m, {"x": random([2, 3, 5, 4])})


@pytest.mark.parametrize("a, exclude_outside", [(-0.75, 0), (-0.5, 1)])
@pytest.mark.parametrize("sizes", [[1, 1, 9, 7], [1, 1, 3, 2]])
def test_resize_cubic(a, exclude_outside, sizes):
    m = resize_model(11, [1, 1, 5, 4], sizes=sizes, mode="cubic", cubic_coeff_a=a, exclude_outside=exclude_outside)
    assert_like_ort(m, {"x": random([1, 1, 5, 4])})


def test_resize_is_layout_generic():
    """NHWC input: the middle axes are resized, the channel axis is not."""
    m = resize_model(13, [1, 6, 5, 8], [1, 2, 1.6, 1], mode="linear")
    assert_like_ort(m, {"x": random([1, 6, 5, 8])})


@pytest.mark.parametrize("key, values", [("scales", [2.0, 3.0]), ("sizes", [7, 3])])
def test_resize_axes_opset_18(key, values):
    kwargs = {key: values}
    m = resize_model(18, [1, 2, 4, 5], **kwargs, axes=[3, -2], mode="nearest")
    assert_like_ort(m, {"x": random([1, 2, 4, 5])})


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_keep_aspect_ratio(policy):
    m = resize_model(18, [1, 1, 4, 6], sizes=[7, 7], axes=[2, 3], keep_aspect_ratio_policy=policy, mode="linear")
    assert_like_ort(m, {"x": random([1, 1, 4, 6])})


@pytest.mark.parametrize("opset, mode", [(7, "nearest"), (7, "linear"), (9, "nearest")])
def test_upsample(opset, mode):
    if opset < 9:
        m = unary("Upsample", opset, [1, 2, 3, 4], mode=mode, scales=[1.0, 1.0, 2.0, 3.0])
    else:
        m = unary("Upsample", opset, [1, 2, 3, 4], {"s": np.array([1, 1, 2, 2], np.float32)}, ["s"], mode=mode)
    assert_like_ort(m, {"x": random([1, 2, 3, 4])})


def test_resize_tf_crop_and_resize_without_roi_names_the_node():
    m = resize_model(18, [1, 1, 4, 4], [1, 1, 0.5, 0.5], mode="linear",
                     coordinate_transformation_mode="tf_crop_and_resize")
    with pytest.raises(lite.InferShapeError, match="Resize node .*tf_crop_and_resize needs a roi of 8 values") as e:
        convert(m)
    assert e.value.status == lite.RET_INFER_ERR


# ---- Dropout, Identity, Constant, ConstantOfShape, Shape, Cast -------------------------------------------------
@pytest.mark.parametrize("opset", [7, 10, 13])
def test_dropout_is_identity_with_a_mask_of_ones(opset):
    """Oracle: the ONNX reference evaluator (onnxruntime returns an all-zero mask before opset 12); the mask
    type is the input's before opset 10 (the spec's T), bool after."""
    mask_type = F if opset < 10 else TensorProto.BOOL
    consts, params = ({"r": np.array(0.3, np.float32), "t": np.array(False)}, ["r", "t"]) if opset >= 12 else ({}, [])
    node = helper.make_node("Dropout", ["x", *params], ["y", "mask"])
    m = model([node], {"x": (F, [2, 3])}, {"y": F, "mask": mask_type}, opset, consts)
    x = random([2, 3])
    ours = run_ours(session_for(m), {"x": x})
    y, mask = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_array_equal(ours["y"], y)
    assert ours["mask"].dtype == (np.float32 if opset < 10 else np.bool_)
    np.testing.assert_array_equal(ours["mask"], mask.astype(ours["mask"].dtype))


def test_dropout_in_training_mode_is_refused():
    m = unary("Dropout", 13, [2, 3], {"r": np.array(0.3, np.float32), "t": np.array(True)}, ["r", "t"])
    with pytest.raises(NotSupportedError, match="training"):
        convert(m)


def test_dropout_with_run_time_ratio_and_training_mode():
    """training_mode and ratio as graph inputs (as in ONNX's training_dropout tests). Oracle: the ONNX
    reference evaluator where the result is deterministic (training_mode false, or ratio 0); in training the
    mask is random, so y = x * mask / (1 - ratio) and the share kept is checked instead."""
    node = helper.make_node("Dropout", ["x", "r", "t"], ["y", "mask"])
    m = model([node], {"x": (F, [40, 50]), "r": (F, []), "t": (TensorProto.BOOL, [])},
              {"y": F, "mask": TensorProto.BOOL}, 13)
    session, x = session_for(m), random([40, 50])
    for r, t in [(0.5, False), (0.0, True)]:
        feeds = {"x": x, "r": np.array(r, np.float32), "t": np.array(t)}
        ours, ref = run_ours(session, feeds), ReferenceEvaluator(m).run(None, feeds)
        np.testing.assert_array_equal(ours["y"], ref[0])
        np.testing.assert_array_equal(ours["mask"], ref[1])
    ours = run_ours(session, {"x": x, "r": np.array(0.25, np.float32), "t": np.array(True)})
    np.testing.assert_allclose(ours["y"], x * ours["mask"] / np.float32(0.75), rtol=1e-6)
    assert ours["mask"].dtype == np.bool_ and 0.7 < ours["mask"].mean() < 0.8


def test_identity():
    assert_like_ort(unary("Identity", 13, [2, 3]), {"x": random([2, 3])})


@pytest.mark.parametrize("key, value", [("value_floats", [1.5, 2.0]), ("value_ints", [3, -4]), ("value_int", 7),
                                        ("value", numpy_helper.from_array(np.arange(6.0, dtype=np.float32)
                                                                          .reshape(2, 3)))])
def test_constant(key, value):
    nodes = [helper.make_node("Constant", [], ["c"], **{key: value}),
             helper.make_node("Identity", ["c"], ["y"])]
    m = model(nodes, {}, {"y": F if "float" in key or key == "value" else I64}, 13)
    ours = run_ours(session_for(m), {})["y"]
    np.testing.assert_array_equal(ours, run_ort(m, {})["y"])


def test_constant_string_is_refused():
    nodes = [helper.make_node("Constant", [], ["y"], value_string="hello")]
    with pytest.raises(NotSupportedError, match="value_string"):
        convert(model(nodes, {}, {"y": TensorProto.STRING}, 13))


@pytest.mark.parametrize("value", [None, numpy_helper.from_array(np.array([7], np.int64)),
                                   numpy_helper.from_array(np.array([0.5], np.float32))])
def test_constant_of_shape(value):
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], **({"value": value} if value is not None else {}))
    out_type = F if value is None else value.data_type
    m = model([node], {}, {"y": out_type}, 13, {"s": np.array([2, 3], np.int64)})
    np.testing.assert_array_equal(run_ours(session_for(m), {})["y"], run_ort(m, {})["y"])


@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -3, "end": 3}, {"start": -10},
                                   {"end": 100}])
def test_shape(attrs):
    node = helper.make_node("Shape", ["x"], ["y"], **attrs)
    m = model([node], {"x": (F, ["N", 3, 4, 1])}, {"y": I64}, 15)
    assert_like_ort(m, {"x": random([2, 3, 4, 1])})


@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL,
                                TensorProto.UINT8, TensorProto.INT8, TensorProto.FLOAT16, TensorProto.DOUBLE])
def test_cast_from_float(to):
    x = np.array([[0.0, 1.7, -2.6, 100.2], [3.5, -0.4, 12.0, 0.9]], np.float32)
    assert_like_ort(unary("Cast", 13, [2, 4], to=to, out_type=to), {"x": x})


@pytest.mark.parametrize("to", [TensorProto.FLOAT, TensorProto.INT32, TensorProto.BOOL, TensorProto.FLOAT16])
def test_cast_from_int64(to):
    x = np.array([[0, 3, -7], [1, 1000, -1]], np.int64)
    assert_like_ort(unary("Cast", 13, [2, 3], to=to, out_type=to, in_type=I64), {"x": x})


def test_cast_to_string_is_refused():
    with pytest.raises(NotSupportedError, match="STRING"):
        convert(unary("Cast", 13, [2], to=TensorProto.STRING, out_type=TensorProto.STRING))


# ---- shape subgraphs -------------------------------------------------------------------------------------------
def test_shape_subgraph_with_dynamic_batch_folds_at_each_resize():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape: [N, 3, 4] -> [N, 12], converted once, run at two
    batch sizes."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    m = model(nodes, {"x": (F, ["N", 3, 4])}, {"y": F}, 13,
              {"zero": np.array(0, np.int64), "axes": np.array([0], np.int64), "minus_one": np.array([-1], np.int64)})
    session = session_for(m)
    for batch in (1, 3):
        x = random([batch, 3, 4])
        ours = run_ours(session, {"x": x})["y"]
        np.testing.assert_array_equal(ours, run_ort(m, {"x": x})["y"])


def test_shape_slice_subgraph_with_dynamic_batch_folds_at_each_resize():
    """Shape -> Slice -> Concat -> Reshape: [N, 3, 4] -> [N, 12] (no scalar constants), at two batch sizes."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "one"], ["n"]),
             helper.make_node("Concat", ["n", "minus_one"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    m = model(nodes, {"x": (F, ["N", 3, 4])}, {"y": F}, 13,
              {"zero": np.array([0], np.int64), "one": np.array([1], np.int64), "minus_one": np.array([-1], np.int64)})
    session = session_for(m)
    for batch in (1, 3):
        x = random([batch, 3, 4])
        np.testing.assert_array_equal(run_ours(session, {"x": x})["y"], run_ort(m, {"x": x})["y"])


def test_int64_data_through_slice_gather_split_concat():
    """Integer tensors computed at run time go through the same kernels as shape math."""
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["s"]),
             helper.make_node("Gather", ["s", "idx"], ["g"], axis=1),
             helper.make_node("Split", ["g", "parts"], ["a", "b"], axis=1),
             helper.make_node("Concat", ["b", "a"], ["y"], axis=1)]
    m = model(nodes, {"x": (I64, [4, 6])}, {"y": I64}, 13,
              {"starts": np.array([-1, 1], np.int64), "ends": np.array([INT64_MIN, 6], np.int64),
               "axes": np.array([0, 1], np.int64), "steps": np.array([-2, 1], np.int64),
               "idx": np.array([4, 0, -1], np.int64), "parts": np.array([1, 2], np.int64)})
    assert_like_ort(m, {"x": random([4, 6], np.int64)})


def efficientnet_padding() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """EfficientNet-Lite0's 17 "same"-padding subgraphs (ConstantOfShape/Concat/Reshape/Slice/Transpose/Reshape/
    Cast -> Pad), cut out of the real model with each Pad's data input as a graph input, and the real
    activations (from onnxruntime on a random image) that feed them."""
    full = shape_inference.infer_shapes(onnx.load(str(EFFICIENTNET)))
    pad_inputs = [n.input[0] for n in full.graph.node if n.op_type == "Pad"]
    pad_outputs = [n.output[0] for n in full.graph.node if n.op_type == "Pad"]
    sub = onnx.utils.Extractor(full).extract_model(pad_inputs, pad_outputs)
    probe = onnx.ModelProto()
    probe.CopyFrom(full)
    probe.graph.output.extend(helper.make_tensor_value_info(n, F, None) for n in pad_inputs[1:])
    image = random([1, 3, 224, 224])
    activations = run_ort(probe, {"input": image})
    return sub, {"input": image} | {n: activations[n] for n in pad_inputs[1:]}


@pytest.mark.shared_data
@pytest.mark.skipif(not EFFICIENTNET.exists(), reason=f"real EfficientNet-Lite0 not found at {EFFICIENTNET}")
def test_efficientnet_padding_subgraphs_fold_into_constant_pads():
    m, feeds = efficientnet_padding()
    graph = to_graph(m)
    assert [n.op for n in graph.nodes] == ["Pad"] * 17
    assert all(graph.values[n.inputs[1]].const is not None for n in graph.nodes)
    assert_like_ort(m, feeds)


# ---- official node tests whose parameters are graph inputs ----------------------------------------------------
# The conformance suite feeds these parameters (Reshape's shape, Slice's starts, Resize's scales...) as graph
# inputs, which our compile-time parameters cannot take (see tests/converter/frontends/onnx/conformance/tensor_ops.txt). Here the same
# cases run with those inputs frozen into initializers, against the official expected outputs.
FROZEN = ["test_constantofshape_float_ones", "test_constantofshape_int_zeros",
          "test_reshape_allowzero_reordered", "test_split_zero_size_splits_opset13",
          "test_split_zero_size_splits_opset18", "test_constant_pad", "test_edge_pad", "test_reflect_pad", "test_wrap_pad", "test_constant_pad_axes",
          "test_constant_pad_negative_axes", "test_reshape_reordered_all_dims", "test_reshape_reordered_last_dims",
          "test_reshape_reduced_dims", "test_reshape_extended_dims", "test_reshape_one_dim",
          "test_reshape_negative_dim", "test_reshape_negative_extended_dims", "test_reshape_zero_dim",
          "test_reshape_zero_and_negative_dim", "test_slice", "test_slice_neg", "test_slice_start_out_of_bounds",
          "test_slice_end_out_of_bounds", "test_slice_default_axes", "test_slice_default_steps",
          "test_slice_neg_steps", "test_slice_negative_axes", "test_split_variable_parts_1d_opset13",
          "test_split_variable_parts_2d_opset13", "test_split_variable_parts_default_axis_opset13",
          "test_split_variable_parts_1d_opset18", "test_split_variable_parts_2d_opset18",
          "test_split_variable_parts_default_axis_opset18", "test_squeeze", "test_squeeze_negative_axes",
          "test_unsqueeze_axis_0", "test_unsqueeze_axis_1", "test_unsqueeze_axis_2", "test_unsqueeze_two_axes",
          "test_unsqueeze_three_axes", "test_unsqueeze_unsorted_axes", "test_unsqueeze_negative_axes",
          "test_upsample_nearest", "test_dropout_default_ratio", "test_dropout_default_mask_ratio"] + [
    f"test_resize_{name}" for name in (
        "upsample_scales_nearest", "downsample_scales_nearest", "upsample_sizes_nearest",
        "downsample_sizes_nearest", "upsample_scales_linear", "upsample_scales_linear_align_corners",
        "downsample_scales_linear", "downsample_scales_linear_align_corners", "upsample_scales_cubic",
        "upsample_scales_cubic_align_corners", "downsample_scales_cubic", "downsample_scales_cubic_align_corners",
        "upsample_sizes_cubic", "downsample_sizes_cubic", "upsample_scales_cubic_A_n0p5_exclude_outside",
        "downsample_scales_cubic_A_n0p5_exclude_outside", "upsample_scales_cubic_asymmetric",
        "downsample_sizes_linear_pytorch_half_pixel", "upsample_sizes_nearest_floor_align_corners",
        "upsample_sizes_nearest_round_prefer_ceil_asymmetric", "upsample_sizes_nearest_ceil_half_pixel",
        "upsample_scales_nearest_axes_2_3", "upsample_scales_nearest_axes_3_2", "upsample_sizes_nearest_axes_2_3",
        "upsample_sizes_nearest_axes_3_2", "upsample_sizes_nearest_not_larger", "upsample_sizes_nearest_not_smaller",
        "downsample_sizes_nearest_not_larger", "downsample_sizes_nearest_not_smaller",
        "downsample_scales_linear_half_pixel_symmetric", "upsample_scales_linear_half_pixel_symmetric")]


def frozen_case(name: str, data_inputs: int | None = None) -> tuple[onnx.ModelProto, dict[str, np.ndarray],
                                                                    list[np.ndarray], float, float]:
    """(model with its parameter graph inputs made initializers, remaining feeds, expected outputs, rtol, atol)
    of an official node test. The first `data_inputs` inputs stay graph inputs: by default the first one, none
    for ConstantOfShape and Range."""
    case = next(c for c in load_model_tests(kind="node") if c.name == name)
    inputs, expected = case.data_sets[0]
    if data_inputs is None:
        data_inputs = 0 if case.model.graph.node[0].op_type in ("ConstantOfShape", "Range") else 1
    m = onnx.ModelProto()
    m.CopyFrom(case.model)
    names = [vi.name for vi in m.graph.input]
    for vi_name, value in zip(names[data_inputs:], inputs[data_inputs:]):
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(value), vi_name))
    del m.graph.input[data_inputs:]
    feeds = {n: np.asarray(v) for n, v in zip(names[:data_inputs], inputs)}
    return m, feeds, [np.asarray(e) for e in expected], case.rtol, case.atol


@pytest.mark.parametrize("name", FROZEN)
def test_official_case_with_frozen_parameters(name):
    m, feeds, expected, rtol, atol = frozen_case(name)
    ours = run_ours(session_for(m), feeds)
    for out, want in zip(m.graph.output, expected):
        assert ours[out.name].dtype == want.dtype and ours[out.name].shape == want.shape
        np.testing.assert_allclose(ours[out.name], want, rtol=rtol, atol=atol)
