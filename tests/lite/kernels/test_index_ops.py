"""Shape and index ops (Expand, Tile, Range, Size, OneHot, Trilu, EyeLike, DepthToSpace, SpaceToDepth,
ArgMax/ArgMin, TopK, GatherElements, GatherND, ScatterElements/Scatter, ScatterND, NonZero, Compress, Unique,
ReverseSequence, CenterCropPad, Col2Im), each converted from a small
ONNX model and run by our runtime, checked against onnxruntime or the official node-test outputs;
and their bad input: the named status and the node in the message."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from lite.status import InferShapeError, LiteError, OpExecuteError
from tests.lite.kernels.test_tensor_ops import assert_like_ort, frozen_case, model, random, run_ours
from tests.util import session_for

F, I64 = TensorProto.FLOAT, TensorProto.INT64
RNG = np.random.default_rng(1)


def elem(dtype: type) -> int:
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def op_model(op: str, inputs: dict[str, tuple[int, list]], outputs: dict[str, int], opset: int,
             consts: dict[str, np.ndarray] | None = None, order: list[str] | None = None, **attrs) -> onnx.ModelProto:
    """One `op` node reading `order` (default: the inputs, then the constants)."""
    names = order or [*inputs, *(consts or {})]
    node = helper.make_node(op, names, list(outputs), name=f"my_{op.lower()}", **attrs)
    return model([node], inputs, outputs, opset, consts)


# ---- official cases whose size parameters are graph inputs, run with them frozen ----------------------------------
FROZEN = ["test_expand_dim_changed", "test_expand_dim_unchanged", "test_tile", "test_tile_precomputed",
          "test_range_float_type_positive_delta", "test_range_float16_type_positive_delta",
          "test_range_int32_type_negative_delta", "test_onehot_without_axis", "test_onehot_with_axis",
          "test_onehot_negative_indices", "test_onehot_out_of_range_indices", "test_onehot_with_negative_axis",
          "test_top_k", "test_top_k_uint64", "test_top_k_same_values", "test_top_k_same_values_largest",
          "test_top_k_same_values_2d", "test_top_k_smallest", "test_top_k_negative_axis",
          "test_compress_0", "test_compress_1", "test_compress_default_axis", "test_compress_negative_axis"] + [
    f"test_center_crop_pad_{name}" for name in ("crop", "pad", "crop_and_pad", "crop_axes_hwc",
                                                "crop_negative_axes_hwc", "crop_axes_chw")] + [
    f"test_col2im{name}" for name in ("", "_strides", "_pads", "_dilations", "_5d")]
# Data-dependent output sizes: the data input too is frozen, so the whole node folds at conversion.
FOLDED = ["test_nonzero_example", "test_unique_sorted_without_axis", "test_unique_not_sorted_without_axis",
          "test_unique_sorted_with_axis", "test_unique_sorted_with_axis_3d", "test_unique_sorted_with_negative_axis",
          "test_unique_length_1"]


@pytest.mark.parametrize("name", FROZEN + FOLDED)
def test_official_case_with_frozen_parameters(name):
    m, feeds, expected, rtol, atol = frozen_case(name, 0 if name in FOLDED else None)
    ours = run_ours(session_for(m), feeds)
    for out, want in zip(m.graph.output, expected):
        assert ours[out.name].dtype == want.dtype and ours[out.name].shape == want.shape
        np.testing.assert_allclose(ours[out.name], want, rtol=rtol, atol=atol)


# ---- Expand, Tile, Range, Size, OneHot ----------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, shape, target", [(np.float32, [3, 1], [2, 1, 4]), (np.int8, [1, 4], [3, 1]),
                                                  (np.bool_, [2, 1, 3], [2, 5, 3]), (np.float16, [], [2, 2])])
def test_expand(dtype, shape, target):
    m = op_model("Expand", {"x": (elem(dtype), shape)}, {"y": elem(dtype)}, 13, {"s": np.array(target, np.int64)})
    x = random(shape, dtype) if dtype != np.bool_ else RNG.random(shape) > 0.5
    assert_like_ort(m, {"x": np.asarray(x, dtype)})


@pytest.mark.parametrize("dtype, repeats", [(np.float32, [2, 1, 3]), (np.int64, [1, 0, 2]), (np.bool_, [3, 2, 1])])
def test_tile(dtype, repeats):
    m = op_model("Tile", {"x": (elem(dtype), [2, 3, 2])}, {"y": elem(dtype)}, 13, {"r": np.array(repeats, np.int64)})
    assert_like_ort(m, {"x": np.asarray(random([2, 3, 2], np.int64) > 0 if dtype == np.bool_ else
                                        random([2, 3, 2], dtype), dtype)})


@pytest.mark.parametrize("dtype, start, limit, delta", [(np.int64, 2, 11, 3), (np.int32, 10, -3, -4),
                                                        (np.float32, 0.5, 3.2, 0.25), (np.int64, 0, -5, 1),
                                                        (np.float32, 1.0, 1.0, 2.0)])
def test_range(dtype, start, limit, delta):
    """A Range of constants folds at conversion; a count below zero gives an empty tensor, as in onnxruntime."""
    consts = {n: np.array(v, dtype) for n, v in zip("sld", (start, limit, delta))}
    nodes = [helper.make_node("Range", list(consts), ["r"]), helper.make_node("Add", ["r", "x"], ["y"])]
    m = model(nodes, {"x": (elem(dtype), [1])}, {"y": elem(dtype)}, 11, consts)
    assert_like_ort(m, {"x": np.ones(1, dtype)})


@pytest.mark.parametrize("shape", [[2, 3, 4], [], [0, 5]])
def test_size(shape):
    m = op_model("Size", {"x": (F, shape)}, {"y": I64}, 13)
    assert_like_ort(m, {"x": random(shape)})


@pytest.mark.parametrize("axis, depth, idx_type", [(-1, 5, np.int64), (0, 4, np.int64), (1, 3.0, np.float32)])
def test_one_hot_with_run_time_indices_and_values(axis, depth, idx_type):
    depth_arr = np.array(depth, np.float32 if isinstance(depth, float) else np.int64)
    m = op_model("OneHot", {"i": (elem(idx_type), [2, 3]), "v": (F, [2])}, {"y": F}, 11, {"d": depth_arr},
                 order=["i", "d", "v"], axis=axis)
    indices = RNG.integers(-6, 6, [2, 3]).astype(idx_type)
    assert_like_ort(m, {"i": indices, "v": np.array([-1.5, 2.0], np.float32)})


# ---- Trilu, EyeLike, DepthToSpace, SpaceToDepth ---------------------------------------------------------------------
@pytest.mark.parametrize("upper, k", [(1, None), (0, None), (1, -1), (0, 2)])
def test_trilu_with_a_run_time_k(upper, k):
    inputs = {"x": (F, [2, 4, 5])} | ({"k": (I64, [])} if k is not None else {})
    m = op_model("Trilu", inputs, {"y": F}, 14, upper=upper)
    feeds = {"x": random([2, 4, 5])} | ({"k": np.array(k, np.int64)} if k is not None else {})
    assert_like_ort(m, feeds)


@pytest.mark.parametrize("dtype, k, to", [(np.float32, 0, None), (np.int32, 2, TensorProto.FLOAT),
                                          (np.float32, -1, TensorProto.INT64)])
def test_eye_like(dtype, k, to):
    attrs = {"k": k} | ({"dtype": to} if to is not None else {})
    m = op_model("EyeLike", {"x": (elem(dtype), [3, 4])}, {"y": to if to is not None else elem(dtype)}, 9, **attrs)
    assert_like_ort(m, {"x": random([3, 4], dtype)})


@pytest.mark.parametrize("opset, mode", [(7, None), (11, "DCR"), (13, "CRD")])
def test_depth_to_space(opset, mode):
    m = op_model("DepthToSpace", {"x": (F, [2, 8, 3, 2])}, {"y": F}, opset, blocksize=2,
                 **({"mode": mode} if mode else {}))
    assert_like_ort(m, {"x": random([2, 8, 3, 2])})


@pytest.mark.parametrize("dtype", [np.float32, np.uint8])
def test_space_to_depth(dtype):
    m = op_model("SpaceToDepth", {"x": (elem(dtype), [1, 3, 6, 4])}, {"y": elem(dtype)}, 13, blocksize=2)
    assert_like_ort(m, {"x": random([1, 3, 6, 4], np.int64).astype(dtype)})


# ---- ArgMax, ArgMin, TopK ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype, opset, attrs", [(np.float32, 11, {"axis": 1}), (np.float16, 13, {"keepdims": 0}),
                                                 (np.int32, 12, {"axis": -1, "select_last_index": 1}),
                                                 (np.uint8, 13, {"axis": 2, "keepdims": 0, "select_last_index": 1})])
def test_arg_min_max(op, dtype, opset, attrs):
    """Small integers: many ties, so first and last index differ."""
    m = op_model(op, {"x": (elem(dtype), [3, 4, 5])}, {"y": I64}, opset, **attrs)
    assert_like_ort(m, {"x": RNG.integers(0, 3, [3, 4, 5]).astype(dtype)})


@pytest.mark.parametrize("dtype, opset, k, attrs", [(np.float32, 9, 3, {"axis": 1}), (np.float32, 10, 2, {}),
                                                    (np.int32, 11, 4, {"largest": 0, "axis": 0}),
                                                    (np.uint8, 11, 5, {"axis": -2}), (np.float16, 11, 0, {}),
                                                    (np.int64, 11, 6, {"axis": 2, "largest": 1})])
def test_top_k(dtype, opset, k, attrs):
    """Small integers: ties must keep the lower index first."""
    if opset < 10:
        m = op_model("TopK", {"x": (elem(dtype), [4, 5, 6])}, {"v": elem(dtype), "i": I64}, opset, k=k, **attrs)
    else:
        m = op_model("TopK", {"x": (elem(dtype), [4, 5, 6])}, {"v": elem(dtype), "i": I64}, opset,
                     {"k": np.array([k], np.int64)}, **attrs)
    assert_like_ort(m, {"x": RNG.integers(0, 4, [4, 5, 6]).astype(dtype)})


# ---- gathers and scatters ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis, dtype", [(0, np.float32), (1, np.int64), (-1, np.bool_)])
def test_gather_elements_with_run_time_indices(axis, dtype):
    shape = [3, 4, 5]
    idx_shape = [3, 4, 5]
    idx_shape[axis] = 2
    m = op_model("GatherElements", {"x": (elem(dtype), shape), "i": (I64, idx_shape)}, {"y": elem(dtype)}, 13,
                 axis=axis)
    x = np.asarray(random(shape, np.int64) > 0 if dtype == np.bool_ else random(shape, dtype), dtype)
    assert_like_ort(m, {"x": x, "i": RNG.integers(-shape[axis], shape[axis], idx_shape)})


def test_gather_elements_with_constant_indices():
    idx = RNG.integers(-4, 4, [2, 4, 3]).astype(np.int32)
    m = op_model("GatherElements", {"x": (F, [2, 4, 3])}, {"y": F}, 11, {"i": idx}, axis=1)
    assert_like_ort(m, {"x": random([2, 4, 3])})


@pytest.mark.parametrize("data, idx, batch_dims", [([4, 5, 3], [2, 3, 2], 0), ([4, 5], [6, 1], 0),
                                                  ([2, 3, 4, 5], [2, 3, 1], 2), ([2, 3, 4], [2, 5, 2], 1)])
def test_gather_nd_with_run_time_indices(data, idx, batch_dims):
    m = op_model("GatherND", {"x": (F, data), "i": (I64, idx)}, {"y": F}, 12, batch_dims=batch_dims)
    dims = np.array(data[batch_dims:batch_dims + idx[-1]])
    assert_like_ort(m, {"x": random(data), "i": (RNG.integers(0, 100, idx) % dims) - dims * RNG.integers(0, 2, idx)})


SCATTER_REDUCTIONS = ["none", "add", "mul", "max", "min"]


@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS)
@pytest.mark.parametrize("axis", [0, -1])
def test_scatter_elements_with_run_time_indices(reduction, axis):
    """Reductions with duplicate indices; without one, distinct indices (duplicates leave any update)."""
    shape, idx_shape = [4, 5], [3, 5] if axis == 0 else [4, 3]
    if reduction == "none":
        idx = np.argsort(RNG.random([4, 5]), axis=axis)[:3] if axis == 0 else np.argsort(RNG.random([4, 5]), 1)[:, :3]
    else:
        idx = RNG.integers(-shape[axis], shape[axis], idx_shape)
    m = op_model("ScatterElements", {"x": (F, shape), "i": (I64, idx_shape), "u": (F, idx_shape)}, {"y": F}, 18,
                 axis=axis, reduction=reduction)
    assert_like_ort(m, {"x": random(shape), "i": idx.astype(np.int64), "u": random(idx_shape)})


def test_scatter_10_is_scatter_elements():
    idx = np.array([[1, 0, 2], [0, 2, 1]], np.int64)
    m = op_model("Scatter", {"x": (F, [3, 3]), "u": (F, [2, 3])}, {"y": F}, 10, {"i": idx}, order=["x", "i", "u"],
                 axis=0)
    assert_like_ort(m, {"x": random([3, 3]), "u": random([2, 3])})


@pytest.mark.parametrize("reduction", SCATTER_REDUCTIONS)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_nd_with_run_time_updates(reduction, dtype):
    idx = np.array([[[0, 1], [2, -1]], [[1, 3], [0, 1]]], np.int64) if reduction != "none" else \
        np.array([[[0, 1], [2, -1]], [[1, 3], [0, 0]]], np.int64)
    m = op_model("ScatterND", {"x": (elem(dtype), [3, 4, 2]), "u": (elem(dtype), [2, 2, 2])}, {"y": elem(dtype)},
                 18, {"i": idx}, order=["x", "i", "u"], reduction=reduction)
    assert_like_ort(m, {"x": random([3, 4, 2], dtype), "u": random([2, 2, 2], dtype)})


def test_scatter_nd_with_run_time_indices():
    m = op_model("ScatterND", {"x": (F, [5, 3]), "i": (I64, [2, 1]), "u": (F, [2, 3])}, {"y": F}, 13)
    assert_like_ort(m, {"x": random([5, 3]), "i": np.array([[4], [-5]], np.int64), "u": random([2, 3])})


# ---- NonZero, Compress, Unique (data-dependent sizes), ReverseSequence, CenterCropPad, Col2Im ----------------------
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_non_zero_of_a_folded_value(dtype):
    c = (RNG.integers(-1, 2, [3, 4]) != 0) if dtype == np.bool_ else RNG.integers(-1, 2, [3, 4]).astype(dtype)
    nodes = [helper.make_node("Identity", ["c"], ["v"]), helper.make_node("NonZero", ["v"], ["n"]),
             helper.make_node("Cast", ["n"], ["n_f"], to=F), helper.make_node("Add", ["n_f", "x"], ["y"])]
    m = model(nodes, {"x": (F, [1])}, {"y": F}, 13, {"c": c})
    assert_like_ort(m, {"x": np.ones(1, np.float32)})


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress_with_a_constant_condition(axis):
    cond = np.array([True, False, True, True, False, True][:{None: 5, 0: 2, -1: 4}[axis]])
    m = op_model("Compress", {"x": (F, [3, 4])}, {"y": F}, 11, {"c": cond}, **({} if axis is None else {"axis": axis}))
    assert_like_ort(m, {"x": random([3, 4])})


@pytest.mark.parametrize("sort, axis", [(1, None), (0, None), (1, 0), (0, 1)])
def test_unique_of_a_constant(sort, axis):
    c = RNG.integers(0, 3, [4, 3]).astype(np.float32)
    c[2] = c[0]
    outs = {"u": F, "idx": I64, "inv": I64, "cnt": I64}
    nodes = [helper.make_node("Unique", ["c"], list(outs), sorted=sort, **({} if axis is None else {"axis": axis})),
             helper.make_node("Add", ["u", "x"], ["y"])]
    m = model(nodes, {"x": (F, [1])}, {"y": F} | {k: I64 for k in list(outs)[1:]}, 11, {"c": c})
    assert_like_ort(m, {"x": np.ones(1, np.float32)})


@pytest.mark.parametrize("batch_axis, time_axis, dtype", [(1, 0, np.float32), (0, 1, np.int64)])
def test_reverse_sequence_with_run_time_lengths(batch_axis, time_axis, dtype):
    shape = [5, 3, 2] if time_axis == 0 else [3, 5, 2]
    m = op_model("ReverseSequence", {"x": (elem(dtype), shape), "n": (I64, [3])}, {"y": elem(dtype)}, 10,
                 batch_axis=batch_axis, time_axis=time_axis)
    assert_like_ort(m, {"x": random(shape, dtype), "n": np.array([5, 0, 3], np.int64)})


@pytest.mark.parametrize("axes, target", [(None, [3, 6, 2]), ([1, 2], [2, 7]), ([-1], [1])])
def test_center_crop_pad(axes, target):
    m = op_model("CenterCropPad", {"x": (F, [4, 5, 3])}, {"y": F}, 18, {"s": np.array(target, np.int64)},
                 **({} if axes is None else {"axes": axes}))
    assert_like_ort(m, {"x": random([4, 5, 3])})


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}])
def test_col2im(attrs):
    image, block = [6, 7], [3, 2]
    s, d = attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    p = attrs.get("pads", [0, 0, 0, 0])
    blocks = [(image[i] + p[i] + p[2 + i] - d[i] * (block[i] - 1) - 1) // s[i] + 1 for i in range(2)]
    shape = [2, 2 * 6, blocks[0] * blocks[1]]
    m = op_model("Col2Im", {"x": (F, shape)}, {"y": F}, 18, {"i": np.array(image, np.int64),
                                                              "b": np.array(block, np.int64)}, **attrs)
    assert_like_ort(m, {"x": random(shape)})


# ---- bad input: named status, the node in the message ---------------------------------------------------------------
def expect(kind: type[LiteError], text: str, m: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> None:
    with pytest.raises(kind) as err:
        session = session_for(m)
        run_ours(session, feeds or {})
    assert text in str(err.value) and "my_" in str(err.value), str(err.value)


@pytest.mark.parametrize("op", ["GatherElements", "ScatterElements"])
def test_constant_indices_out_of_bounds_fail_conversion(op):
    inputs = {"x": (F, [3, 4])} | ({"u": (F, [1, 4])} if op == "ScatterElements" else {})
    m = op_model(op, inputs, {"y": F}, 13, {"i": np.array([[0, 1, 3, 2]], np.int64)},
                 order=["x", "i", *(["u"] if op == "ScatterElements" else [])])
    expect(InferShapeError, "index 3 is out of range [-3, 3)", m)


@pytest.mark.parametrize("op", ["GatherElements", "ScatterElements", "GatherND", "ScatterND"])
def test_run_time_indices_out_of_bounds_fail_the_run(op):
    nd = op.endswith("ND")
    idx_shape = [2, 1] if nd else [2, 4]
    inputs = {"x": (F, [3, 4]), "i": (I64, idx_shape)}
    if op.startswith("Scatter"):
        inputs["u"] = (F, [2, 4])
    m = op_model(op, inputs, {"y": F}, 13)
    feeds = {"x": random([3, 4]), "i": np.full(idx_shape, -4, np.int64)}
    if op.startswith("Scatter"):
        feeds["u"] = random([2, 4])
    expect(OpExecuteError, "index -4 is out of range", m, feeds)


def test_top_k_with_k_larger_than_the_axis():
    m = op_model("TopK", {"x": (F, [3, 4])}, {"v": F, "i": I64}, 11, {"k": np.array([5], np.int64)})
    expect(InferShapeError, "k = 5 is outside [0, 4]", m)


def test_range_with_zero_delta():
    consts = {n: np.array(v, np.int64) for n, v in zip("sld", (0, 5, 0))}
    nodes = [helper.make_node("Range", list(consts), ["r"], name="my_range"),
             helper.make_node("Add", ["r", "x"], ["y"])]
    expect(InferShapeError, "delta is zero", model(nodes, {"x": (I64, [1])}, {"y": I64}, 11, consts))


def test_reverse_sequence_with_a_length_past_the_time_axis():
    m = op_model("ReverseSequence", {"x": (F, [4, 2]), "n": (I64, [2])}, {"y": F}, 10)
    expect(OpExecuteError, "must lie in [0, 4]", m, {"x": random([4, 2]), "n": np.array([5, 1], np.int64)})
