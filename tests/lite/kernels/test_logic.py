"""Comparison and logic ops (Compare, Bitwise, Where, FloatClass, BitCast): importer rules + kernels against
onnxruntime and onnx.reference, over the dtypes each ONNX op allows, and their bad-input contract."""
from __future__ import annotations

import numpy as np
import pytest

from converter import convert
from lite.status import InvalidOpAttrError, NotSupportedError
from tests.lite.kernels.test_elementwise import one_node
from tests.util import assert_matches_oracles

rng = np.random.default_rng(0)


def ints(dtype: type, *shape: int, low: int = -4, high: int = 5) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(max(low, info.min), min(high, info.max), shape, endpoint=True).astype(dtype)


def floats(dtype: type, *shape: int) -> np.ndarray:
    """Small integers as floats (so equality is often true), a NaN and infinities."""
    x = rng.integers(-2, 3, shape).astype(dtype)
    x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf]
    return x


@pytest.mark.parametrize("op", ["Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64, np.int8, np.int32, np.int64, np.uint8,
                                   np.uint64])
def test_compare_broadcasts_over_every_numeric_dtype(op: str, dtype: type) -> None:
    make = floats if np.dtype(dtype).kind == "f" else ints
    a, b = make(dtype, 2, 3, 4), make(dtype, 3, 1)
    assert_matches_oracles(one_node(op, {"a": a, "b": b}, out_dtype=np.bool_), {"a": a, "b": b})


def test_equal_compares_bools() -> None:
    a, b = rng.random((3, 4)) < 0.5, rng.random(4) < 0.5
    assert_matches_oracles(one_node("Equal", {"a": a, "b": b}, out_dtype=np.bool_), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
def test_logical_ops_broadcast(op: str) -> None:
    a, b = rng.random((2, 3, 4)) < 0.5, rng.random((3, 1)) < 0.5
    assert_matches_oracles(one_node(op, {"a": a, "b": b}), {"a": a, "b": b})


def test_not() -> None:
    x = rng.random((3, 4)) < 0.5
    assert_matches_oracles(one_node("Not", {"x": x}), {"x": x})


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                                   np.uint64])
def test_bitwise_binary_ops(op: str, dtype: type) -> None:
    a, b = ints(dtype, 3, 4, low=-100, high=100), ints(dtype, 4, low=-100, high=100)
    assert_matches_oracles(one_node(op, {"a": a, "b": b}, opset=18), {"a": a, "b": b})


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint64])
def test_bitwise_not(dtype: type) -> None:
    x = ints(dtype, 3, 4, low=-100, high=100)
    assert_matches_oracles(one_node("BitwiseNot", {"x": x}, opset=18), {"x": x})


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.uint32, np.uint64])
def test_bit_shift(direction: str, dtype: type) -> None:
    x, shift = ints(dtype, 3, 4, low=0, high=200), ints(dtype, 4, low=0, high=7)
    assert_matches_oracles(one_node("BitShift", {"x": x, "s": shift}, direction=direction), {"x": x, "s": shift})


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.uint8, np.bool_])
def test_where_broadcasts_all_three_inputs(dtype: type) -> None:
    cond = rng.random((2, 1, 4)) < 0.5
    x, y = (rng.integers(0, 2, s).astype(dtype) for s in ((3, 1), (2, 3, 4)))
    feeds = {"c": cond, "a": x, "b": y}
    oracles = ("reference",) if dtype is np.bool_ else ("onnxruntime", "reference")   # no bool Where in ORT
    assert_matches_oracles(one_node("Where", feeds, out_dtype=dtype), feeds, oracles=oracles)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_is_nan(dtype: type) -> None:
    x = floats(dtype, 3, 4)
    assert_matches_oracles(one_node("IsNaN", {"x": x}, out_dtype=np.bool_), {"x": x})


@pytest.mark.parametrize("positive, negative", [(1, 1), (1, 0), (0, 1), (0, 0)])
def test_is_inf_detects_the_signs_asked_for(positive: int, negative: int) -> None:
    x = floats(np.float32, 3, 4)
    model = one_node("IsInf", {"x": x}, out_dtype=np.bool_, detect_positive=positive, detect_negative=negative)
    assert_matches_oracles(model, {"x": x})


@pytest.mark.parametrize("source, target", [(np.float32, np.int32), (np.int64, np.float64), (np.int8, np.uint8),
                                            (np.uint16, np.float16), (np.bool_, np.uint8)])
def test_bit_cast_keeps_the_bits(source: type, target: type) -> None:
    from onnx import helper
    x = (rng.standard_normal((3, 4)) * 50).astype(source)
    model = one_node("BitCast", {"x": x}, out_dtype=target, opset=26,
                     to=helper.np_dtype_to_tensor_dtype(np.dtype(target)))
    assert_matches_oracles(model, {"x": x}, oracles=("reference",))    # onnxruntime has no BitCast yet


def test_bit_cast_between_widths_is_refused_naming_the_node() -> None:
    from onnx import TensorProto
    x = np.zeros((2, 2), np.float32)
    model = one_node("BitCast", {"x": x}, out_dtype=np.int64, opset=26, to=TensorProto.INT64, name="reinterpret")
    with pytest.raises(InvalidOpAttrError, match="reinterpret.*widths differ"):
        convert(model)


def test_bit_shift_direction_must_be_left_or_right() -> None:
    x = np.zeros(3, np.uint8)
    model = one_node("BitShift", {"x": x, "s": x}, direction="UP", name="shifter")
    with pytest.raises(InvalidOpAttrError, match="shifter.*direction 'UP'"):
        convert(model)


def test_ordering_bools_is_refused() -> None:
    a = np.zeros(3, np.bool_)
    with pytest.raises(NotSupportedError, match="cmp.*bool"):
        convert(one_node("Greater", {"a": a, "b": a}, name="cmp"))


def test_to_nhwc_pushes_transposes_through_compare_and_where() -> None:
    """Conv -> Greater(0) -> Where(mask, conv, -conv) -> Conv stays NHWC between the convolutions."""
    from onnx import TensorProto, helper, numpy_helper
    from converter import to_graph
    w = numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w")
    zero = numpy_helper.from_array(np.zeros((), np.float32), "zero")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Greater", ["c1", "zero"], ["mask"]),
             helper.make_node("Neg", ["c1"], ["neg"]),
             helper.make_node("Where", ["mask", "c1", "neg"], ["abs"]),
             helper.make_node("Conv", ["abs", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, zero])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    assert [n.op for n in to_graph(model).nodes].count("Transpose") == 2      # at the input and the output only
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    assert_matches_oracles(model, {"x": x}, rtol=1e-4, atol=1e-4)
