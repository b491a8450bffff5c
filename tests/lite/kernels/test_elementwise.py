"""Activation, elementwise and reduction ops: importer rules + kernels against onnxruntime on small models, and
the vectorised erf against math.erf."""
from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from converter import to_graph
from lite.kernels.activation import activation_fn
from lite.kernels.unary import erf
from lite.status import LiteError
from schema import fb
from tests.util import run_lite, run_ort, session_for

A = fb.ActivationType
rng = np.random.default_rng(0)


def model_of(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: dict[str, np.dtype],
             initializers: dict[str, np.ndarray] | None = None, opset: int = 17) -> onnx.ModelProto:
    """A model whose graph inputs take the shapes and dtypes of `inputs`; outputs are named with their dtype."""
    def info(name: str, dtype: np.dtype, shape: Any) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), shape)

    graph = helper.make_graph(
        nodes, "test", [info(n, a.dtype, a.shape) for n, a in inputs.items()],
        [info(n, d, None) for n, d in outputs.items()],
        [numpy_helper.from_array(np.asarray(a), n) for n, a in (initializers or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model: onnx.ModelProto, feeds: dict[str, np.ndarray], rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """Our converter + runtime agree with onnxruntime on every output (exactly for integer outputs)."""
    got, want = run_lite(session_for(model), feeds), run_ort(model, feeds)
    for name, expected in want.items():
        assert got[name].dtype == expected.dtype and got[name].shape == expected.shape, name
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(got[name], expected, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(got[name], expected)


def one_node(op: str, inputs: dict[str, np.ndarray], initializers: dict[str, np.ndarray] | None = None,
             out_dtype: np.dtype | None = None, opset: int = 17, **attrs: Any) -> onnx.ModelProto:
    names = [*inputs, *(initializers or {})]
    dtype = out_dtype or next(iter(inputs.values())).dtype
    return model_of([helper.make_node(op, names, ["y"], **attrs)], inputs, {"y": dtype}, initializers, opset)


def ops_of(model: onnx.ModelProto) -> list[tuple[str, dict]]:
    return [(n.op, n.attrs) for n in to_graph(model).nodes]


def f32(*shape: int, low: float = -3.0, high: float = 3.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


# ---- binary arithmetic ------------------------------------------------------------------------------------------
BINARY = ["Add", "Sub", "Mul", "Div", "Min", "Max"]
SHAPES = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)), ((2, 1, 4, 1), (3, 1, 5)), ((), (2, 3)),
          ((4, 1), (1, 6))]


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_binary_op_broadcasts_like_onnxruntime(op: str, shapes: tuple) -> None:
    a, b = f32(*shapes[0]), f32(*shapes[1], low=0.5, high=2.0)
    check(one_node(op, {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("op", [*BINARY, "Pow"])
def test_binary_op_with_scalar_constant(op: str) -> None:
    x = f32(2, 3, 4, low=0.1, high=3.0)
    check(one_node(op, {"x": x}, {"c": np.array(1.5, np.float32)}), {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", BINARY)
def test_integer_arithmetic_matches_onnxruntime(op: str, dtype: type) -> None:
    a = rng.integers(-50, 50, (3, 4)).astype(dtype)
    b = rng.choice([-7, -3, -1, 2, 5, 9], (4,)).astype(dtype)
    check(one_node(op, {"a": a, "b": b}), {"a": a, "b": b})


def test_integer_div_truncates_toward_zero() -> None:
    a = np.array([7, -7, 7, -7, 6, -6, 0], np.int64)
    b = np.array([2, 2, -2, -2, 4, 4, 3], np.int64)
    check(one_node("Div", {"a": a, "b": b}), {"a": a, "b": b})


def test_elementwise_chain_computed_in_place() -> None:
    """Intermediate results die at their consumer, so the planner reuses their memory for the next output."""
    x = f32(2, 8, 5)
    nodes = [helper.make_node("Add", ["x", "c"], ["t1"]), helper.make_node("Mul", ["t1", "c"], ["t2"]),
             helper.make_node("Sub", ["t2", "x"], ["t3"]), helper.make_node("Div", ["t3", "c"], ["t4"]),
             helper.make_node("Exp", ["t4"], ["t5"]), helper.make_node("Neg", ["t5"], ["y"])]
    check(model_of(nodes, {"x": x}, {"y": np.float32}, {"c": np.array(1.25, np.float32)}), {"x": x})


def test_constant_int64_arithmetic_folds_at_conversion() -> None:
    x = rng.integers(-9, 9, (2, 3)).astype(np.int64)
    nodes = [helper.make_node("Add", ["c1", "c2"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = model_of(nodes, {"x": x}, {"y": np.int64}, {"c1": np.array([1, 2, 3]), "c2": np.array([4, 5, 6])})
    assert [op for op, _ in ops_of(model)] == ["Mul"]
    check(model, {"x": x})


def test_add_relu_fuses_into_add() -> None:
    a, b = f32(2, 3, 4), f32(2, 3, 4)
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])]
    model = model_of(nodes, {"a": a, "b": b}, {"y": np.float32})
    assert ops_of(model) == [("Add", {"activation": A.RELU})]
    check(model, {"a": a, "b": b})


def test_mismatched_shapes_are_rejected_at_conversion() -> None:
    a, b = f32(2, 3), f32(4, 5)
    with pytest.raises(LiteError, match="do not broadcast"):
        session_for(one_node("Add", {"a": a, "b": b}))


# ---- Pow ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("base, exponent", [
    (np.float32, np.float32), (np.float32, np.int64), (np.float32, np.int32), (np.int64, np.float32),
    (np.int32, np.int32), (np.int64, np.int64)], ids=str)
def test_pow_operand_dtypes(base: type, exponent: type) -> None:
    a = rng.integers(1, 5, (3, 4)).astype(base)
    b = rng.integers(0, 4, (3, 4)).astype(exponent)
    check(one_node("Pow", {"a": a, "b": b}), {"a": a, "b": b})


@pytest.mark.parametrize("exponent", [2.0, 0.5, 1.0, -1.0, 3.0, 2.5])
def test_pow_constant_exponent(exponent: float) -> None:
    x = f32(2, 3, 4, low=0.1, high=3.0)
    check(one_node("Pow", {"x": x}, {"e": np.array(exponent, np.float32)}), {"x": x})


def test_pow_integer_constant_exponent_on_float_base() -> None:
    x = f32(2, 3, 4)
    check(one_node("Pow", {"x": x}, {"e": np.array([3], np.int64)}), {"x": x})


# ---- unary --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op, low, high", [("Sqrt", 0.0, 9.0), ("Exp", -20.0, 20.0), ("Log", 1e-3, 1e3),
                                           ("Neg", -5.0, 5.0), ("Abs", -5.0, 5.0), ("Erf", -5.0, 5.0)])
def test_unary_float_op(op: str, low: float, high: float) -> None:
    x = f32(3, 4, 5, low=low, high=high)
    check(one_node(op, {"x": x}), {"x": x})


@pytest.mark.parametrize("op", ["Neg", "Abs"])
def test_neg_and_abs_on_integers(op: str) -> None:
    x = rng.integers(-100, 100, (4, 5)).astype(np.int32)
    check(one_node(op, {"x": x}), {"x": x})


def test_erf_matches_math_erf_on_dense_grid() -> None:
    x = np.concatenate([np.linspace(-8, 8, 400_001, dtype=np.float32),
                        np.array([0.0, -0.0, 1e-30, -1e-30, np.inf, -np.inf, 3e38, -3e38], np.float32)])
    want = np.array([math.erf(v) for v in x.astype(np.float64)])
    got = np.empty_like(x)
    erf(x, got)
    assert np.abs(got.astype(np.float64) - want).max() <= 2e-7


def test_erf_in_place_on_non_contiguous_input() -> None:
    x = f32(64, 48).T
    want = np.array([math.erf(v) for v in x.ravel().astype(np.float64)]).reshape(x.shape)
    erf(x, x)
    np.testing.assert_allclose(x, want, atol=2e-7, rtol=0)


def test_erf_propagates_nan() -> None:
    x = np.array([np.nan, 0.5, np.nan], np.float32)
    erf(x, x)
    assert np.isnan(x[0]) and np.isnan(x[2]) and abs(x[1] - math.erf(0.5)) < 2e-7


def test_gelu_activation_is_exact_erf_form() -> None:
    x = np.linspace(-6, 6, 10_001, dtype=np.float32)
    want = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)])
    got = np.empty_like(x)
    activation_fn(A.GELU)(x, got)
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)


# ---- activations --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op, opset, attrs", [
    ("Relu", 14, {}), ("Sigmoid", 13, {}), ("Tanh", 13, {}), ("LeakyRelu", 16, {}),
    ("LeakyRelu", 16, {"alpha": 0.3}), ("Elu", 7, {}), ("Elu", 7, {"alpha": 0.4}), ("HardSigmoid", 7, {}),
    ("HardSigmoid", 7, {"alpha": 0.3, "beta": 0.4}), ("HardSwish", 14, {}), ("Gelu", 20, {}),
    ("Gelu", 20, {"approximate": "tanh"})], ids=str)
def test_activation_matches_onnxruntime(op: str, opset: int, attrs: dict) -> None:
    x = f32(2, 3, 4, 5, low=-6.0, high=6.0)
    check(one_node(op, {"x": x}, opset=opset, **attrs), {"x": x})


@pytest.mark.parametrize("op, kind", [("Relu", A.RELU), ("Sigmoid", A.SIGMOID), ("Tanh", A.TANH),
                                      ("HardSwish", A.HSWISH), ("Elu", A.ELU), ("Gelu", A.GELU)])
def test_activation_imports_as_one_activation_node(op: str, kind: int) -> None:
    x = f32(2, 3)
    assert [(o, a["type"]) for o, a in ops_of(one_node(op, {"x": x}, opset=20))] == [("Activation", kind)]


def test_sigmoid_saturates_without_overflow() -> None:
    x = np.array([-1e4, -100.0, -88.0, 0.0, 88.0, 100.0, 1e4, -np.inf, np.inf], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        check(one_node("Sigmoid", {"x": x}), {"x": x}, atol=1e-30)


def test_integer_relu_becomes_maximum() -> None:
    x = rng.integers(-9, 9, (3, 4)).astype(np.int32)
    model = one_node("Relu", {"x": x}, opset=14)
    assert [op for op, _ in ops_of(model)] == ["Maximum"]
    check(model, {"x": x})


def test_unsupported_gelu_approximation_is_refused() -> None:
    with pytest.raises(LiteError, match="approximate='fast'"):
        session_for(one_node("Gelu", {"x": f32(2)}, opset=20, approximate="fast"))


# ---- Clip ---------------------------------------------------------------------------------------------------------
CLIP_BOUNDS = [((0.0, 6.0), A.RELU6), ((0.0, None), A.RELU), ((-1.0, 1.0), A.HARD_TANH), ((None, 2.0), A.HARD_TANH)]


def _clip_model(lo: float | None, hi: float | None, opset: int, x: np.ndarray) -> onnx.ModelProto:
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        return one_node("Clip", {"x": x}, opset=opset, **attrs)
    inits = {k: np.array(v, np.float32) for k, v in (("lo", lo), ("hi", hi)) if v is not None}
    names = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
    return model_of([helper.make_node("Clip", names, ["y"])], {"x": x}, {"y": np.float32}, inits, opset)


@pytest.mark.parametrize("opset", [7, 13])
@pytest.mark.parametrize("bounds, kind", CLIP_BOUNDS, ids=str)
def test_clip_with_constant_bounds_maps_to_activation(bounds: tuple, kind: int, opset: int) -> None:
    x = f32(2, 3, 4, low=-8.0, high=8.0)
    model = _clip_model(*bounds, opset, x)
    assert [(op, a["type"]) for op, a in ops_of(model)] == [("Activation", kind)]
    check(model, {"x": x})


def test_clip_with_min_above_max_gives_max() -> None:
    x = f32(2, 3, 4)
    check(_clip_model(2.0, -1.0, 13, x), {"x": x})


def test_clip_without_bounds_is_an_identity() -> None:
    x = f32(2, 3)
    model = _clip_model(None, None, 13, x)
    assert all(op != "Activation" for op, _ in ops_of(model))
    check(model, {"x": x})


def test_clip_with_runtime_bounds_uses_maximum_and_minimum() -> None:
    x, lo, hi = f32(2, 3, 4, low=-8.0, high=8.0), np.array(-2.0, np.float32), np.array(3.0, np.float32)
    model = model_of([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x, "lo": lo, "hi": hi},
                     {"y": np.float32}, opset=13)
    assert [op for op, _ in ops_of(model)] == ["Maximum", "Minimum"]
    check(model, {"x": x, "lo": lo, "hi": hi})


def test_clip_on_integers() -> None:
    x = rng.integers(-100, 100, (3, 4)).astype(np.int8)
    model = model_of([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": x}, {"y": np.int8},
                     {"lo": np.array(-5, np.int8), "hi": np.array(7, np.int8)}, opset=13)
    check(model, {"x": x})


# ---- PRelu --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("slope_shape", [(4, 1, 1), (5,), (1,), (2, 4, 3, 5)], ids=str)
def test_prelu_slope_broadcasts_unidirectionally(slope_shape: tuple) -> None:
    x = f32(2, 4, 3, 5)
    check(one_node("PRelu", {"x": x}, {"slope": f32(*slope_shape, low=0.0, high=0.5)}), {"x": x})


def test_prelu_per_channel_after_conv_in_nhwc() -> None:
    x = f32(1, 3, 6, 6)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c", "slope"], ["y"])]
    inits = {"w": f32(4, 3, 3, 3, low=-0.5, high=0.5), "slope": f32(4, 1, 1, low=0.0, high=0.5)}
    check(model_of(nodes, {"x": x}, {"y": np.float32}, inits, 13), {"x": x})


# ---- Min / Max / Sum / Mean ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic_op_of_three_broadcast_inputs(op: str) -> None:
    feeds = {"a": f32(2, 3, 4), "b": f32(4), "c": f32(3, 1)}
    check(one_node(op, feeds), feeds)


@pytest.mark.parametrize("op", ["Min", "Max", "Sum", "Mean"])
def test_variadic_op_of_one_input_is_a_copy(op: str) -> None:
    x = f32(2, 3)
    check(one_node(op, {"x": x}), {"x": x})


# ---- Reduce -------------------------------------------------------------------------------------------------------
REDUCE = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd"]
AXES = [[1], [-1], [0, 2], [1, 2, 3], []]


def _axes_input_from(op: str) -> int:
    return 13 if op == "ReduceSum" else 18


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_with_axes_attribute(op: str, axes: list[int], keepdims: int) -> None:
    x = f32(2, 3, 4, 5, low=0.5, high=1.5)
    attrs = {"axes": axes} if axes else {}
    check(one_node(op, {"x": x}, opset=_axes_input_from(op) - 1, keepdims=keepdims, **attrs), {"x": x})


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", AXES[:-1], ids=str)
@pytest.mark.parametrize("op", REDUCE)
def test_reduce_with_constant_axes_input(op: str, axes: list[int], keepdims: int) -> None:
    x = f32(2, 3, 4, 5, low=0.5, high=1.5)
    model = one_node(op, {"x": x}, {"axes": np.array(axes, np.int64)}, opset=18, keepdims=keepdims)
    check(model, {"x": x})


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_without_axes_input_reduces_everything(op: str) -> None:
    x = f32(2, 3, 4, low=0.5, high=1.5)
    check(one_node(op, {"x": x}, opset=18, keepdims=0), {"x": x})


@pytest.mark.parametrize("op", REDUCE)
def test_reduce_noop_with_empty_axes_is_an_identity(op: str) -> None:
    x = f32(2, 3, 4)
    model = one_node(op, {"x": x}, {"axes": np.array([], np.int64)}, opset=18, noop_with_empty_axes=1)
    assert all(op != "Reduce" for op, _ in ops_of(model))
    check(model, {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean"])
def test_reduce_integers(op: str, dtype: type) -> None:
    x = rng.integers(-20, 20, (3, 4, 5)).astype(dtype)
    check(one_node(op, {"x": x}, {"axes": np.array([1], np.int64)}, opset=18), {"x": x})


def test_reduce_mean_over_spatial_axes_after_conv_in_nhwc() -> None:
    """The to_nhwc pass renumbers the axes input when it moves the reduction onto the NHWC tensor."""
    x = f32(1, 3, 6, 6)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]),
             helper.make_node("ReduceMean", ["c", "axes"], ["y"], keepdims=1)]
    inits = {"w": f32(4, 3, 3, 3, low=-0.5, high=0.5), "axes": np.array([2, 3], np.int64)}
    check(model_of(nodes, {"x": x}, {"y": np.float32}, inits, 18), {"x": x})


def test_reduce_axes_out_of_range_is_rejected() -> None:
    with pytest.raises(LiteError, match="out of range"):
        session_for(one_node("ReduceSum", {"x": f32(2, 3)}, {"axes": np.array([2], np.int64)}, opset=13))


@pytest.mark.parametrize("axes", [[1], [0, 1], []])
def test_reduce_axes_from_a_graph_input_run_at_run_time(axes: list[int]) -> None:
    x, axes = f32(2, 3), np.array(axes, np.int64)
    check(one_node("ReduceSum", {"x": x, "axes": axes}, opset=13, keepdims=0), {"x": x, "axes": axes})
