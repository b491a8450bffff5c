"""Reductions (L1, L2, LogSum, LogSumExp, SumSquare) and normalisations (InstanceNormalization,
GroupNormalization, LpNormalization, MeanVarianceNormalization): importer rules + kernels against onnxruntime
and onnx.reference, and the bad-input contract."""
from __future__ import annotations

import numpy as np
import pytest

from converter import convert
from lite.status import InvalidOpAttrError
from tests.node_cases import node_cases
from tests.lite.kernels.test_elementwise import one_node
from tests.lite.kernels.test_math import with_parameters_frozen
from tests.util import assert_matches_oracles, run_lite, session_for

rng = np.random.default_rng(0)
REDUCTIONS = ["ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("axes", [None, [1], [0, -1]], ids=str)
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_over_axes(op: str, axes: list | None, keepdims: int) -> None:
    x = rng.uniform(0.1 if op == "ReduceLogSum" else -3, 3, (3, 4, 5)).astype(np.float32)
    x.reshape(-1)[0] = 60.0 if op == "ReduceLogSumExp" else x.reshape(-1)[0]     # exp overflows float32
    params = {} if axes is None else {"axes": np.array(axes, np.int64)}
    assert_matches_oracles(one_node(op, {"x": x}, params, opset=18, keepdims=keepdims), {"x": x}, rtol=1e-5)


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_before_opset_18_take_axes_as_an_attribute(op: str) -> None:
    x = rng.uniform(0.1, 3, (3, 4, 5)).astype(np.float32)
    assert_matches_oracles(one_node(op, {"x": x}, opset=13, axes=[2], keepdims=0), {"x": x}, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
@pytest.mark.parametrize("op", ["ReduceL1", "ReduceL2", "ReduceSumSquare"])
def test_integer_and_double_reductions(op: str, dtype: type) -> None:
    x = rng.integers(-5, 6, (3, 4)).astype(dtype)
    # onnx.reference's int32 ReduceSumSquare returns int64 (numpy's sum promotion); ONNX keeps the input type
    reference_promotes = op == "ReduceSumSquare" and dtype == np.int32
    oracles = ("onnxruntime",) if reference_promotes else ("onnxruntime", "reference")
    assert_matches_oracles(one_node(op, {"x": x}, {"axes": np.array([1], np.int64)}, opset=18), {"x": x},
                           oracles=oracles)


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
def test_log_reductions_of_nothing_are_minus_infinity(op: str) -> None:
    x = np.zeros((2, 0, 3), np.float32)
    assert_matches_oracles(one_node(op, {"x": x}, {"axes": np.array([1], np.int64)}, opset=18), {"x": x},
                           oracles=("reference",))


@pytest.mark.parametrize("case", [c for p in ("reduce_l1", "reduce_l2", "reduce_log_sum", "reduce_sum_square")
                                  for c in node_cases(p) if "expanded" not in c[0]], ids=lambda c: c[0])
def test_official_reduction_cases_with_the_axes_frozen(case: tuple) -> None:
    """The official node tests of these reductions feed the axes as a graph input; frozen, they must pass."""
    _, model, inputs, outputs = case
    got = run_lite(session_for(with_parameters_frozen(model, inputs)), {model.graph.input[0].name: inputs[0]})
    np.testing.assert_allclose(got[model.graph.output[0].name], outputs[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (2, 4, 7), (1, 3, 2, 2, 3)], ids=str)
def test_instance_normalization(shape: tuple, dtype: type) -> None:
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    params = {"s": rng.standard_normal(shape[1]).astype(dtype), "b": rng.standard_normal(shape[1]).astype(dtype)}
    tol = 3e-3 if dtype == np.float16 else 1e-5
    model = one_node("InstanceNormalization", {"x": x}, params, epsilon=1e-3)
    assert_matches_oracles(model, {"x": x}, rtol=tol, atol=tol)


@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_normalization(groups: int, opset: int) -> None:
    x = (rng.standard_normal((2, 6, 3, 4)) * 2).astype(np.float32)
    size = 6 if opset >= 21 else groups
    params = {"s": rng.standard_normal(size).astype(np.float32), "b": rng.standard_normal(size).astype(np.float32)}
    model = one_node("GroupNormalization", {"x": x}, params, opset=opset, num_groups=groups, epsilon=1e-4)
    # onnxruntime implements GroupNormalization at opset 18 only (per-group scale and bias)
    oracles = ("onnxruntime", "reference") if opset == 18 else ("reference",)
    assert_matches_oracles(model, {"x": x}, rtol=1e-5, atol=1e-5, oracles=oracles)


def test_group_normalization_groups_must_divide_the_channels() -> None:
    x = np.zeros((1, 6, 2, 2), np.float32)
    params = {"s": np.ones(6, np.float32), "b": np.zeros(6, np.float32)}
    with pytest.raises(InvalidOpAttrError, match="gn.*num_groups 4 must be positive and divide the 6 channels"):
        convert(one_node("GroupNormalization", {"x": x}, params, opset=21, num_groups=4, name="gn"))


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_normalization(axis: int, p: int) -> None:
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    x[0, :, 0] = 0.0                                                  # a zero vector normalises to zeros
    # onnx.reference's L1 norm sums x, not |x|
    oracles = ("onnxruntime",) if p == 1 else ("onnxruntime", "reference")
    assert_matches_oracles(one_node("LpNormalization", {"x": x}, axis=axis, p=p), {"x": x}, oracles=oracles)


def test_lp_normalization_p_must_be_1_or_2() -> None:
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(InvalidOpAttrError, match="lp.*p must be 1 or 2, got 3"):
        convert(one_node("LpNormalization", {"x": x}, p=3, name="lp"))


@pytest.mark.parametrize("axes", [None, [1], [0, 1, 2, 3]], ids=str)
def test_mean_variance_normalization(axes: list | None) -> None:
    x = (rng.standard_normal((2, 3, 4, 5)) * 3 + 2).astype(np.float32)
    model = one_node("MeanVarianceNormalization", {"x": x}, **({} if axes is None else {"axes": axes}))
    assert_matches_oracles(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_instance_norm_between_convolutions_runs_channels_last() -> None:
    """Conv -> InstanceNormalization -> Relu -> Conv: to_nhwc moves the channel axis of the norm; transposes
    remain at the graph's input and output only."""
    from onnx import TensorProto, helper, numpy_helper
    from converter import to_graph
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
             for n, s in (("w", (4, 4, 3, 3)), ("s", (4,)), ("b", (4,)))]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("InstanceNormalization", ["c1", "s", "b"], ["n"]),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Conv", ["r", "w"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 5, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ops = [n.op for n in to_graph(model).nodes]
    assert ops.count("Transpose") == 2 and "GroupNorm" in ops
    x = rng.standard_normal((2, 4, 5, 6)).astype(np.float32)
    assert_matches_oracles(model, {"x": x}, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3, 5, 6), (6, 3)], ids=str)
def test_batch_normalization_training_mode_uses_batch_statistics(shape: tuple) -> None:
    from onnx import helper
    from tests.lite.kernels.test_elementwise import model_of
    c = shape[1]
    feeds = {"x": (rng.standard_normal(shape) * 2 + 1).astype(np.float32),
             "s": rng.uniform(0.5, 2, c).astype(np.float32), "b": rng.standard_normal(c).astype(np.float32),
             "mean": rng.standard_normal(c).astype(np.float32), "var": rng.uniform(0.5, 2, c).astype(np.float32)}
    node = helper.make_node("BatchNormalization", list(feeds), ["y", "running_mean", "running_var"],
                            training_mode=1, momentum=0.8, epsilon=1e-3)
    model = model_of([node], feeds, {"y": np.float32, "running_mean": np.float32, "running_var": np.float32},
                     opset=15)
    assert_matches_oracles(model, feeds, rtol=1e-5, atol=1e-5)
