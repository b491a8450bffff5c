"""The neural-network ops (Conv, ConvTranspose, Gemm, MatMul, BatchNormalization, pooling, LRN,
LayerNormalization, Softmax, LogSoftmax) against onnxruntime on small random single-node models."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import lite
from converter import convert
from tests.util import assert_matches_oracles, run_lite, run_ort, session_for, small_cnn

RNG = np.random.default_rng(1234)


def _array(shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "u":
        return RNG.integers(0, 255, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def node_model(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str],
               opset: int = 13, outputs: tuple[str, ...] = ("y",), **attrs: Any) -> onnx.ModelProto:
    """One `op` node reading `inputs` (graph inputs from `feeds`, initializers from `consts`; "" = omitted);
    outputs have the first feed's dtype."""
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                    for n, a in feeds.items()]
    out_type = helper.np_dtype_to_tensor_dtype(next(iter(feeds.values())).dtype)
    graph_outputs = [helper.make_tensor_value_info(o, out_type, None) for o in outputs if o]
    node = helper.make_node(op, inputs, list(outputs), **attrs)
    graph = helper.make_graph([node], op.lower(), graph_inputs, graph_outputs,
                              [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def assert_matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-4, atol: float = 1e-4) -> None:
    want = run_ort(model, feeds)
    got = run_lite(session_for(model), feeds)
    for name, expected in want.items():
        assert got[name].shape == expected.shape, name
        np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol, err_msg=name)


def check(op: str, x_shape: tuple[int, ...], consts: dict[str, np.ndarray] | None = None, opset: int = 13,
          dtype: type = np.float32, **attrs: Any) -> None:
    """`op`(x, *consts) with random x against onnxruntime."""
    consts = consts or {}
    feeds = {"x": _array(x_shape, dtype)}
    assert_matches_ort(node_model(op, feeds, consts, ["x", *consts], opset, **attrs), feeds)


def refused(model: onnx.ModelProto, match: str) -> None:
    with pytest.raises(lite.LiteError, match=match):
        convert(model)


# ---- Conv ----------------------------------------------------------------------------------------------------
CONV_CASES = {
    "pads": ((1, 3, 9, 9), (4, 3, 3, 3), dict(pads=[1, 1, 1, 1])),
    "strides_asymmetric_pads": ((2, 3, 11, 9), (5, 3, 3, 3), dict(strides=[2, 3], pads=[1, 0, 2, 1])),
    "dilations": ((1, 2, 12, 12), (3, 2, 3, 3), dict(dilations=[2, 3], pads=[2, 1, 2, 1])),
    "dilations_eight_channels": ((2, 8, 12, 11), (12, 8, 3, 3), dict(dilations=[2, 3], pads=[2, 1, 2, 1])),
    "groups": ((2, 4, 8, 7), (6, 2, 3, 2), dict(group=2, pads=[1, 0, 1, 1])),
    "winograd_3x3": ((2, 16, 9, 10), (24, 16, 3, 3), dict(pads=[1, 1, 1, 1])),
    "winograd_3x3_odd_unpadded": ((2, 16, 14, 9), (16, 16, 3, 3), dict(pads=[0, 2, 1, 0])),
    "winograd_too_few_tiles": ((1, 16, 7, 7), (16, 16, 3, 3), dict(pads=[1, 1, 1, 1])),
    "depthwise": ((1, 8, 10, 10), (8, 1, 3, 3), dict(group=8, pads=[1, 1, 1, 1])),
    "depthwise_stride2": ((2, 6, 11, 10), (6, 1, 3, 3), dict(group=6, strides=[2, 2], pads=[1, 1, 1, 1])),
    "depthwise_5x5_dilated": ((1, 4, 13, 12), (4, 1, 5, 5), dict(group=4, dilations=[2, 1], pads=[4, 2, 4, 2])),
    "depthwise_row_bands": ((2, 16, 75, 66), (16, 1, 3, 3), dict(group=16, pads=[1, 1, 1, 1])),
    "depthwise_row_bands_stride2": ((2, 16, 151, 70), (16, 1, 5, 3), dict(group=16, strides=[2, 2],
                                                                       pads=[2, 1, 1, 0])),
    "depthwise_multiplier2": ((1, 4, 7, 7), (8, 1, 3, 3), dict(group=4, pads=[1, 1, 1, 1])),
    "depthwise_24ch_dilated_strided": ((2, 24, 9, 19), (24, 1, 3, 3), dict(group=24, dilations=[1, 2], strides=[1, 2],
                                                                          pads=[0, 2, 1, 1])),
    "depthwise_kernel_wider_than_input": ((1, 8, 5, 3), (8, 1, 5, 5), dict(group=8, pads=[2, 2, 2, 2])),
    "depthwise_63ch_strided": ((1, 63, 9, 11), (63, 1, 3, 3), dict(group=63, strides=[2, 1], pads=[1, 1, 1, 1])),
    "dense_first_layer_stride2": ((2, 3, 17, 15), (16, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "dense_first_layer_dilated": ((1, 4, 12, 13), (24, 4, 3, 5), dict(dilations=[2, 1], pads=[2, 2, 1, 0])),
    "pointwise": ((2, 8, 6, 5), (16, 8, 1, 1), {}),
    "pointwise_stride2": ((1, 8, 7, 7), (16, 8, 1, 1), dict(strides=[2, 2])),
    "pointwise_many_rows": ((1, 64, 32, 32), (48, 64, 1, 1), {}),
    "pointwise_few_rows_many_outputs": ((1, 16, 5, 5), (72, 16, 1, 1), {}),
    "same_upper": ((1, 3, 10, 9), (4, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "same_lower": ((1, 3, 10, 9), (4, 3, 4, 4), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    "valid": ((1, 3, 10, 9), (4, 3, 3, 3), dict(auto_pad="VALID")),
    "conv1d": ((2, 3, 20), (5, 3, 3), dict(pads=[1, 2], strides=[2])),
    "one_channel_5x5": ((2, 1, 16, 16), (6, 1, 5, 5), {}),
    "two_channels_strided_padded": ((4, 2, 15, 13), (8, 2, 3, 3), dict(strides=[2, 2], pads=[1, 0, 1, 2])),
    "one_channel_dilated": ((2, 1, 14, 14), (5, 1, 3, 2), dict(dilations=[2, 3], pads=[2, 1, 2, 1])),
}


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv(case: str) -> None:
    x, w, attrs = CONV_CASES[case]
    check("Conv", x, {"w": _array(w), "b": _array(w[:1])}, **attrs)


def test_conv_without_bias() -> None:
    check("Conv", (1, 3, 6, 6), {"w": _array((4, 3, 3, 3))}, pads=[1, 1, 1, 1])


@pytest.mark.parametrize("group", [1, 4])
def test_conv_weight_fed_at_run_time(group: int) -> None:
    feeds = {"x": _array((1, 4, 7, 7)), "w": _array((4, 4 // group, 3, 3))}
    assert_matches_ort(node_model("Conv", feeds, {}, ["x", "w"], group=group, pads=[1, 1, 1, 1]), feeds)


def test_conv_same_padding_is_recomputed_after_resize() -> None:
    model = node_model("Conv", {"x": _array((1, 3, 8, 8))}, {"w": _array((4, 3, 3, 3))}, ["x", "w"],
                       strides=[2, 2], auto_pad="SAME_UPPER")
    session = session_for(model)
    for k, dim in enumerate(model.graph.input[0].type.tensor_type.shape.dim):    # onnxruntime: any shape
        dim.dim_param = f"d{k}"
    x = _array((3, 3, 11, 13))
    np.testing.assert_allclose(run_lite(session, {"x": x})["y"], run_ort(model, {"x": x})["y"], rtol=1e-4,
                               atol=1e-5)


CONV_3D_CASES = {
    "pads": ((1, 3, 6, 7, 5), (4, 3, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
    "strides_dilations": ((2, 2, 9, 8, 8), (3, 2, 3, 2, 3), dict(strides=[2, 1, 2], dilations=[2, 2, 1],
                                                                  pads=[2, 0, 1, 1, 1, 0])),
    "groups": ((1, 4, 5, 6, 6), (6, 2, 2, 3, 3), dict(group=2, pads=[0, 1, 1, 1, 1, 1])),
    "depthwise": ((1, 4, 5, 6, 6), (4, 1, 3, 3, 3), dict(group=4, pads=[1, 1, 1, 1, 1, 1])),
    "same_upper": ((1, 2, 7, 6, 5), (3, 2, 3, 3, 2), dict(strides=[2, 2, 2], auto_pad="SAME_UPPER")),
}


@pytest.mark.parametrize("case", CONV_3D_CASES)
def test_conv_3d(case: str) -> None:
    x, w, attrs = CONV_3D_CASES[case]
    check("Conv", x, {"w": _array(w), "b": _array(w[:1])}, **attrs)


def test_conv_3d_weight_fed_at_run_time_and_dynamic_batch() -> None:
    feeds = {"x": _array((1, 2, 5, 5, 5)), "w": _array((3, 2, 3, 3, 3))}
    model = node_model("Conv", feeds, {}, ["x", "w"], pads=[1, 1, 1, 1, 1, 1])
    session = session_for(model)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    for batch in (1, 3):
        feeds["x"] = _array((batch, 2, 5, 5, 5))
        np.testing.assert_allclose(run_lite(session, feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4,
                                   atol=1e-4)


# ---- ConvTranspose -------------------------------------------------------------------------------------------
CONV_TRANSPOSE_CASES = {
    "plain": ((1, 2, 4, 4), (2, 3, 3, 3), {}),
    "strides_pads": ((1, 2, 5, 4), (2, 3, 3, 3), dict(strides=[2, 3], pads=[1, 0, 1, 2])),
    "output_padding": ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[2, 2], output_padding=[1, 0])),
    "output_shape": ((1, 2, 4, 4), (2, 3, 3, 3), dict(strides=[2, 2], output_shape=[9, 8])),
    "dilations": ((1, 2, 4, 4), (2, 3, 3, 2), dict(dilations=[2, 2])),
    "group": ((2, 4, 3, 3), (4, 2, 3, 3), dict(group=2, strides=[2, 2])),
    "same_upper": ((1, 2, 4, 5), (2, 3, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "same_lower": ((1, 2, 4, 5), (2, 3, 4, 4), dict(strides=[2, 2], auto_pad="SAME_LOWER")),
    "conv1d": ((1, 2, 6), (2, 3, 3), dict(strides=[2], pads=[1, 0])),
}


CONV_TRANSPOSE_3D_CASES = {
    "plain": ((1, 2, 3, 4, 4), (2, 3, 3, 3, 3), {}),
    "strides_pads_output_padding": ((2, 2, 4, 3, 5), (2, 2, 3, 3, 2), dict(strides=[2, 2, 3], pads=[1, 0, 1, 0, 1, 0],
                                                                             output_padding=[1, 0, 2])),
    "dilations_group": ((1, 4, 3, 3, 3), (4, 2, 2, 3, 2), dict(group=2, dilations=[2, 1, 2])),
    "output_shape": ((1, 2, 3, 4, 4), (2, 3, 3, 3, 3), dict(strides=[2, 2, 2], output_shape=[7, 8, 9])),
    "same_lower": ((1, 2, 3, 4, 5), (2, 3, 3, 3, 3), dict(strides=[2, 1, 2], auto_pad="SAME_LOWER")),
}


@pytest.mark.parametrize("case", CONV_TRANSPOSE_3D_CASES)
def test_conv_transpose_3d(case: str) -> None:
    x, w, attrs = CONV_TRANSPOSE_3D_CASES[case]
    check("ConvTranspose", x, {"w": _array(w), "b": _array((w[1] * attrs.get("group", 1),))}, **attrs)


@pytest.mark.parametrize("case", CONV_TRANSPOSE_CASES)
def test_conv_transpose(case: str) -> None:
    x, w, attrs = CONV_TRANSPOSE_CASES[case]
    out_channels = w[1] * attrs.get("group", 1)
    check("ConvTranspose", x, {"w": _array(w), "b": _array((out_channels,))}, **attrs)


# ---- Gemm / MatMul -------------------------------------------------------------------------------------------
GEMM_CASES = {
    "plain": (False, False, 1.0, 1.0, (5,)),
    "trans_a": (True, False, 1.0, 1.0, (5,)),
    "trans_b": (False, True, 1.0, 1.0, (1, 5)),
    "alpha_beta": (False, True, 0.5, 2.0, (5,)),
    "matrix_c": (False, False, 1.0, 0.5, (3, 5)),
    "column_c": (False, False, 1.0, 1.0, (3, 1)),
    "scalar_c": (True, True, 2.0, 1.0, ()),
    "no_c": (False, True, 1.5, 1.0, None),
}


def _gemm(case: str, const_b: bool, const_c: bool) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    trans_a, trans_b, alpha, beta, c_shape = GEMM_CASES[case]
    a, b = _array((4, 3) if trans_a else (3, 4)), _array((5, 4) if trans_b else (4, 5))
    feeds, consts = {"a": a}, {}
    (consts if const_b else feeds)["b"] = b
    names = ["a", "b"]
    if c_shape is not None:
        (consts if const_c else feeds)["c"] = _array(c_shape)
        names.append("c")
    return node_model("Gemm", feeds, consts, names, transA=int(trans_a), transB=int(trans_b), alpha=alpha,
                      beta=beta), feeds


@pytest.mark.parametrize("case", GEMM_CASES)
def test_gemm_with_constant_weight(case: str) -> None:
    assert_matches_ort(*_gemm(case, const_b=True, const_c=True))


@pytest.mark.parametrize("case", GEMM_CASES)
def test_gemm_with_weight_and_bias_fed_at_run_time(case: str) -> None:
    assert_matches_ort(*_gemm(case, const_b=False, const_c=False))


MATMUL_CASES = {
    "2d": ((3, 4), (4, 5)),
    "3d": ((2, 3, 4), (2, 4, 5)),
    "broadcast": ((3, 1, 3, 4), (2, 4, 5)),
    "1d_3d": ((4,), (2, 4, 3)),
    "4d_1d": ((1, 2, 3, 4), (4,)),
    "1d_1d": ((4,), (4,)),
}


@pytest.mark.parametrize("case", MATMUL_CASES)
def test_matmul(case: str) -> None:
    a, b = MATMUL_CASES[case]
    feeds = {"a": _array(a), "b": _array(b)}
    assert_matches_ort(node_model("MatMul", feeds, {}, ["a", "b"]), feeds)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64, np.uint32, np.uint64])
def test_matmul_dtypes(dtype: type) -> None:
    """Every type ONNX MatMul allows, exactly for integers (products wrap as onnxruntime's do)."""
    a, b = _array((2, 3, 4)), _array((4, 5))
    if np.dtype(dtype).kind in "iu":
        a, b = RNG.integers(0, 1 << 20, a.shape), RNG.integers(0, 1 << 20, b.shape)
    feeds = {"a": a.astype(dtype), "b": b.astype(dtype)}
    tol = 2e-3 if dtype == np.float16 else 1e-12
    assert_matches_oracles(node_model("MatMul", feeds, {}, ["a", "b"]), feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("a_shape", [(3, 4), (2, 3, 4), (4,)])
def test_matmul_with_constant_2d_weight(a_shape: tuple[int, ...]) -> None:
    check("MatMul", a_shape, {"b": _array((4, 6))})


# ---- BatchNormalization --------------------------------------------------------------------------------------
def _bn_params(channels: int) -> dict[str, np.ndarray]:
    return {"scale": _array((channels,)), "bias": _array((channels,)), "mean": _array((channels,)),
            "var": RNG.uniform(0.5, 2.0, channels).astype(np.float32)}


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("x_shape", [(2, 3, 4, 5), (2, 3), (2, 3, 7)])
def test_batchnorm(opset: int, x_shape: tuple[int, ...]) -> None:
    check("BatchNormalization", x_shape, _bn_params(3), opset, epsilon=1e-3)


def test_batchnorm_statistics_fed_at_run_time() -> None:
    feeds = {"x": _array((2, 3, 4, 5)), **_bn_params(3)}
    assert_matches_ort(node_model("BatchNormalization", feeds, {}, list(feeds)), feeds)


# ---- pooling -------------------------------------------------------------------------------------------------
POOL_CASES = {
    "plain": dict(kernel_shape=[2, 2]),
    "strides_pads": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    "asymmetric": dict(kernel_shape=[3, 2], strides=[2, 1], pads=[0, 1, 2, 0]),
    "ceil": dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    "ceil_pads": dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    "same_upper": dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    "same_lower": dict(kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_LOWER"),
    "valid": dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="VALID"),
}


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool(case: str) -> None:
    check("MaxPool", (2, 3, 9, 8), **POOL_CASES[case])


def test_max_pool_dilations() -> None:
    check("MaxPool", (1, 2, 9, 9), kernel_shape=[2, 2], dilations=[2, 3], pads=[1, 1, 0, 0])


def test_max_pool_uint8() -> None:
    check("MaxPool", (1, 2, 6, 6), dtype=np.uint8, kernel_shape=[3, 3], pads=[1, 1, 1, 1])


def test_max_pool_1d() -> None:
    check("MaxPool", (2, 3, 10), kernel_shape=[3], strides=[2], pads=[1, 1])


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("case", ["strides_pads", "asymmetric", "ceil_pads", "same_lower"])
def test_max_pool_indices_output(case: str, storage_order: int) -> None:
    feeds = {"x": np.round(_array((2, 3, 9, 8)) * 2) / 2}         # ties: the first tap in H, W order wins
    model = node_model("MaxPool", feeds, {}, ["x"], 12, outputs=("y", "indices"), storage_order=storage_order,
                       **POOL_CASES[case])
    model.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.INT64
    assert_matches_ort(model, feeds, rtol=0, atol=0)


def test_max_pool_1d_indices_output() -> None:
    feeds = {"x": _array((2, 3, 11))}
    model = node_model("MaxPool", feeds, {}, ["x"], outputs=("y", "indices"), kernel_shape=[3], strides=[2],
                       pads=[1, 0])
    model.graph.output[1].type.tensor_type.elem_type = onnx.TensorProto.INT64
    assert_matches_ort(model, feeds, rtol=0, atol=0)


def test_max_pool_3d_indices_output_is_refused() -> None:
    model = node_model("MaxPool", {"x": _array((1, 1, 4, 4, 4))}, {}, ["x"], outputs=("y", "indices"),
                       kernel_shape=[2, 2, 2])
    refused(model, "Indices output of 3-D max pooling")


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("case", ["plain", "strides_pads", "asymmetric", "same_upper"])
def test_lp_pool(case: str, p: int) -> None:
    check("LpPool", (2, 3, 9, 8), opset=18, p=p, **POOL_CASES[case])


def test_lp_pool_1d_dilated() -> None:
    check("LpPool", (2, 3, 12), opset=18, p=2, kernel_shape=[3], dilations=[2], pads=[1, 2])


@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("x_shape", [(2, 5, 4, 3), (2, 5, 7), (1, 3, 3, 4, 5)])
def test_global_lp_pool(x_shape: tuple[int, ...], p: int) -> None:
    check("GlobalLpPool", x_shape, p=p)


POOL_3D_CASES = {
    "plain": dict(kernel_shape=[2, 3, 2]),
    "strides_pads": dict(kernel_shape=[3, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 1, 1, 0]),
    "dilations_ceil": dict(kernel_shape=[2, 2, 2], dilations=[2, 1, 2], strides=[2, 2, 1], ceil_mode=1),
    "same_upper": dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], auto_pad="SAME_UPPER"),
}


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("case", POOL_3D_CASES)
def test_pool_3d(case: str, op: str) -> None:
    attrs = dict(POOL_3D_CASES[case], **({"count_include_pad": 1} if op == "AveragePool" else {}))
    if op == "LpPool" and "ceil_mode" in attrs:
        attrs.pop("ceil_mode")                              # onnxruntime's LpPool has no ceil mode
    check(op, (2, 3, 7, 6, 5), opset=19, **attrs)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pool_3d(op: str) -> None:
    check(op, (2, 3, 4, 5, 3))


@pytest.mark.parametrize("count_include_pad", [0, 1])
@pytest.mark.parametrize("case", POOL_CASES)
def test_average_pool(case: str, count_include_pad: int) -> None:
    check("AveragePool", (2, 3, 9, 8), count_include_pad=count_include_pad, **POOL_CASES[case])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("x_shape", [(2, 5, 4, 3), (2, 5, 7)])
def test_global_pool(op: str, x_shape: tuple[int, ...]) -> None:
    check(op, x_shape)


# ---- LRN, LayerNormalization, Softmax --------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 3, 5])
def test_lrn(size: int) -> None:
    check("LRN", (2, 7, 4, 3), size=size, alpha=2e-3, beta=0.6, bias=1.5)


def test_lrn_even_size_window_leans_forward() -> None:
    """onnxruntime refuses even sizes; the ONNX reference sums channels [c - 1, c + 2] for size 4 (its loop runs
    over dim 0, so the batch is made as large as the channel count)."""
    feeds = {"x": _array((6, 6, 3, 2))}
    model = node_model("LRN", feeds, {}, ["x"], size=4, alpha=0.1, beta=0.5, bias=2.0)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    np.testing.assert_allclose(run_lite(session_for(model), feeds)["y"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
def test_layer_normalization(axis: int) -> None:
    shape = (2, 3, 4, 5)
    check("LayerNormalization", shape, {"scale": _array(shape[axis:]), "bias": _array(shape[axis:])}, 17,
          axis=axis, epsilon=1e-3)


def test_layer_normalization_without_bias() -> None:
    check("LayerNormalization", (3, 8), {"scale": _array((8,))}, 17)


@pytest.mark.parametrize("outputs", [("y", "mean"), ("y", "mean", "inv_std_dev"), ("y", "", "inv_std_dev")])
def test_layer_normalization_statistics_outputs(outputs: tuple[str, ...]) -> None:
    feeds = {"x": _array((3, 8))}
    model = node_model("LayerNormalization", feeds, {"scale": _array((8,))}, ["x", "scale"], 17, outputs=outputs)
    assert_matches_ort(model, feeds)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax(op: str, axis: int, opset: int) -> None:
    check(op, (2, 3, 4), opset=opset, axis=axis)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_softmax_dtypes(op: str, dtype: type) -> None:
    # its own generator: with the module's, the data (and float16's rounding at the tolerance) hung on test order
    feeds = {"x": (np.random.default_rng(11).standard_normal((2, 3, 4)) * 4).astype(dtype)}
    tol = 2e-3 if dtype == np.float16 else 1e-12
    assert_matches_oracles(node_model(op, feeds, {}, ["x"], axis=1), feeds, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_of_large_numbers(op: str) -> None:
    feeds = {"x": np.array([[1000.0, 1001.0, 1002.0], [-1000.0, 0.0, 3.0]], np.float32)}
    assert_matches_ort(node_model(op, feeds, {}, ["x"], axis=-1), feeds)


# ---- whole graphs after Resize ---------------------------------------------------------------------------------
def test_batch_16_after_resize_matches_onnxruntime() -> None:
    model = small_cnn(batch="N")
    session = session_for(model)
    for batch in (1, 16, 1):
        x = _array((batch, 3, 8, 8))
        got, want = run_lite(session, {"input": x}), run_ort(model, {"input": x})
        for name, expected in want.items():
            np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5, err_msg=f"{name}, batch {batch}")
