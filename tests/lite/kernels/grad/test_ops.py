"""Gradient kernels of the math, Where, normalisation and loss ops (ActivationGrad for the new activation types,
UnaryMathGrad, WhereGrad, GroupNormGrad, ReduceGrad for the norm reductions, CumProdGrad, DetGrad, NLLLossGrad),
each driven directly and checked against PyTorch autograd in float64; and the bprop rules (CumSum, CumProd,
Einsum, Det, Hardmax, SoftmaxCrossEntropyLoss), end to end through a training session."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from schema import fb
from tests.lite.kernels.grad.test_basic import run_op
from tests.oracles.torch_autograd import autograd, rel

A, U, R = fb.ActivationType, fb.UnaryMathMode, fb.ReduceMode
TOL = 1e-5
rng = np.random.default_rng(0)


def f32(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def shrink(x: torch.Tensor, lambd: float, bias: float) -> torch.Tensor:
    return torch.where(x > lambd, x - bias, torch.where(x < -lambd, x + bias, torch.zeros_like(x)))


ACTIVATIONS: dict[str, tuple[int, dict, Callable[[torch.Tensor], torch.Tensor]]] = {
    "softplus": (A.SOFTPLUS, {}, F.softplus),
    "softsign": (A.SOFTSIGN, {}, F.softsign),
    "mish": (A.MISH, {}, F.mish),
    "celu": (A.CELU, {"alpha": 0.7}, lambda x: F.celu(x, 0.7)),
    "selu": (A.SELU, {"alpha": 1.6732632423543772, "beta": 1.0507009873554805}, F.selu),
    "thresholded_relu": (A.THRESHOLD_RELU, {"alpha": 0.3}, lambda x: F.threshold(x, 0.3, 0.0)),
    "shrink": (A.SHRINK, {"alpha": 0.5, "beta": 0.2}, lambda x: shrink(x, 0.5, 0.2)),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_grad_matches_autograd(name: str) -> None:
    kind, attrs, fn = ACTIVATIONS[name]
    x, dy = f32(4, 6, low=-4, high=4), f32(4, 6)
    (dx,) = run_op("ActivationGrad", [dy, x], 1, {"type": kind, **attrs})
    assert rel(dx, autograd(fn, dy, x)[0]) < TOL


UNARY = {U.FLOOR: (torch.floor, (-3, 3)), U.CEIL: (torch.ceil, (-3, 3)), U.ROUND: (torch.round, (-3, 3)),
         U.SIGN: (torch.sign, (-3, 3)), U.RECIPROCAL: (torch.reciprocal, (0.5, 3)), U.SIN: (torch.sin, (-3, 3)),
         U.COS: (torch.cos, (-3, 3)), U.TAN: (torch.tan, (-1.2, 1.2)), U.ASIN: (torch.asin, (-0.9, 0.9)),
         U.ACOS: (torch.acos, (-0.9, 0.9)), U.ATAN: (torch.atan, (-3, 3)), U.SINH: (torch.sinh, (-3, 3)),
         U.COSH: (torch.cosh, (-3, 3)), U.ASINH: (torch.asinh, (-3, 3)), U.ACOSH: (torch.acosh, (1.1, 4)),
         U.ATANH: (torch.atanh, (-0.9, 0.9))}


@pytest.mark.parametrize("mode", UNARY, ids=lambda m: next(k for k, v in vars(U).items() if v == m))
def test_unary_math_grad_matches_autograd(mode: int) -> None:
    fn, (low, high) = UNARY[mode]
    x, dy = f32(3, 5, low=low, high=high), f32(3, 5)
    (dx,) = run_op("UnaryMathGrad", [dy, x], 1, {"mode": mode})
    expected = autograd(fn, dy, x)[0]
    assert rel(dx, expected) < TOL if expected.abs().max() > 0 else np.all(dx == 0)


@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 1), (1, 4), (2, 3, 4)), ((4,), (), (3, 1))],
                         ids=str)
def test_where_grad_routes_and_reduces_like_autograd(shapes: tuple) -> None:
    cond_shape, x_shape, y_shape = shapes
    cond = rng.random(cond_shape) < 0.5
    x, y = f32(*x_shape), f32(*y_shape)
    dy = f32(*np.broadcast_shapes(cond_shape, x_shape, y_shape))
    dx, dy_ = run_op("WhereGrad", [dy, cond, x, y], 2)
    want_x, want_y = autograd(lambda a, b: torch.where(torch.tensor(cond), a, b), dy, x, y)
    assert rel(dx, want_x) < TOL and rel(dy_, want_y) < TOL


@pytest.mark.parametrize("axis", [1, -1], ids=["channels_first", "channels_last"])
@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_grad_matches_autograd(groups: int, axis: int) -> None:
    nchw = (2, 6, 3, 4)
    x, dy = f32(*nchw) * 2 + 1, f32(*nchw)
    scale, bias = f32(6), f32(6)
    to_layout = (lambda a: a) if axis == 1 else (lambda a: np.ascontiguousarray(a.transpose(0, 2, 3, 1)))
    attrs = {"num_groups": groups, "axis": axis, "epsilon": 1e-5}
    y, mean, invstd = run_op("GroupNorm", [to_layout(x), scale, bias], 3, attrs)
    dx, dscale, dbias = run_op("GroupNormGrad", [to_layout(dy), to_layout(x), scale, mean, invstd], 3, attrs)
    want_dx, want_scale, want_bias = autograd(lambda a, s, b: F.group_norm(a, groups, s, b, 1e-5), dy, x, scale, bias)
    assert rel(y, to_layout(F.group_norm(torch.tensor(x, dtype=torch.float64), groups, torch.tensor(
        scale, dtype=torch.float64), torch.tensor(bias, dtype=torch.float64), 1e-5).numpy())) < TOL
    assert rel(dx, to_layout(want_dx.numpy())) < 1e-4
    assert rel(dscale, want_scale) < TOL and rel(dbias, want_bias) < TOL


NORM_REDUCTIONS = {R.L1: lambda x, d: x.abs().sum(d, keepdim=True), R.L2: lambda x, d: x.norm(dim=d, keepdim=True),
                   R.SUM_SQUARE: lambda x, d: (x * x).sum(d, keepdim=True),
                   R.LOG_SUM: lambda x, d: x.sum(d, keepdim=True).log(),
                   R.LOG_SUM_EXP: lambda x, d: x.logsumexp(d, keepdim=True)}


@pytest.mark.parametrize("mode", NORM_REDUCTIONS, ids=lambda m: next(k for k, v in vars(R).items() if v == m))
def test_reduce_grad_of_the_norm_reductions_matches_autograd(mode: int) -> None:
    x = f32(3, 4, 5, low=0.2 if mode == R.LOG_SUM else -2)
    axes = np.array([1, 2], np.int64)
    (y,) = run_op("Reduce", [x, axes], 1, {"mode": mode}, params=[1])
    dy = f32(*y.shape)
    (dx,) = run_op("ReduceGrad", [dy, x, y, axes], 1, {"mode": mode}, params=[3])
    assert rel(dx, autograd(lambda t: NORM_REDUCTIONS[mode](t, (1, 2)), dy, x)[0]) < TOL


# ---- bprop rules, end to end: one training step's weight gradients against PyTorch ----------------------------
def _training_step(nodes: list, weights: dict[str, np.ndarray], x: np.ndarray, labels: np.ndarray,
                   opset: int = 17) -> dict[str, np.ndarray]:
    """The weight gradients of one MSE training step of the one-input model `nodes` (input x, output y)."""
    import lite
    from onnx import TensorProto, helper, numpy_helper
    from converter import convert_for_training
    from converter.train import TrainParams
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(labels.shape))],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    buf = convert_for_training(model, TrainParams(loss="mse"))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    session.GetInputsByTensorName("x").set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    session.RunGraph()
    return {t.tensor_name(): t.numpy() for t in session.GetGradients()}


def _torch_gradients(fn: Callable[..., torch.Tensor], weights: dict[str, np.ndarray], x: np.ndarray,
                     labels: np.ndarray) -> dict[str, torch.Tensor]:
    ts = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    loss = F.mse_loss(fn(torch.tensor(x, dtype=torch.float64), **ts), torch.tensor(labels, dtype=torch.float64))
    loss.backward()
    return {k: t.grad for k, t in ts.items()}


def _assert_same_gradients(ours: dict[str, np.ndarray], theirs: dict[str, torch.Tensor]) -> None:
    assert set(ours) == set(theirs)
    for name, expected in theirs.items():
        assert rel(ours[name], expected) < 1e-4, name


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_bprop_matches_autograd(exclusive: int, reverse: int) -> None:
    from onnx import helper, numpy_helper
    weights = {"w": f32(5, 6)}
    x, labels = f32(4, 5), f32(4, 6)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("CumSum", ["h", "axis"], ["y"], exclusive=exclusive, reverse=reverse)]
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    nodes.insert(0, helper.make_node("Constant", [], ["axis"], value=axis))

    def torch_cumsum(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        h = t @ w
        h = h.flip(1) if reverse else h
        c = h.cumsum(1) - (h if exclusive else 0)
        return c.flip(1) if reverse else c
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(torch_cumsum, weights, x, labels))


@pytest.mark.parametrize("equation", ["bi,ij->bj", "bi,ij", "bi,jk,ik->bj", "...i,ij->...j"])
def test_einsum_bprop_matches_autograd(equation: str) -> None:
    from onnx import helper
    shapes = {"bi,jk,ik->bj": [(6, 3), (5, 3)]}.get(equation, [(5, 6)])
    weights = {f"w{k}": f32(*s) for k, s in enumerate(shapes)}
    x, labels = f32(4, 5), f32(4, 6)
    nodes = [helper.make_node("Einsum", ["x", *weights], ["y"], equation=equation)]
    fn = lambda t, **w: torch.einsum(equation, t, *w.values())  # noqa: E731
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))


def test_instance_norm_where_and_unary_math_bprop_match_autograd() -> None:
    """x * w -> InstanceNormalization(scale, bias) -> Where(h > 0, Sin(h), Softplus(h)); w varies along the
    width (a per-channel w would cancel in the normalisation and get a zero gradient)."""
    from onnx import helper
    weights = {"w": f32(1, 1, 4), "scale": f32(3), "bias": f32(3)}
    x, labels = f32(2, 3, 4, 4), f32(2, 3, 4, 4)
    nodes = [helper.make_node("Mul", ["x", "w"], ["m"]),
             helper.make_node("InstanceNormalization", ["m", "scale", "bias"], ["h"], epsilon=1e-5),
             helper.make_node("Greater", ["h", "zero"], ["positive"]),
             helper.make_node("Sin", ["h"], ["s"]), helper.make_node("Softplus", ["h"], ["p"]),
             helper.make_node("Where", ["positive", "s", "p"], ["y"])]
    nodes.insert(0, helper.make_node("Constant", [], ["zero"], value_float=0.0))

    def fn(t: torch.Tensor, w: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        h = F.instance_norm(t * w, weight=scale, bias=bias, eps=1e-5)
        return torch.where(h > 0, torch.sin(h), F.softplus(h))
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))


# ---- CumProd, Det, NLLLoss (SoftmaxCrossEntropyLoss), Hardmax ---------------------------------------------------
def _torch_cumprod(t: torch.Tensor, axis: int, exclusive: int, reverse: int) -> torch.Tensor:
    t = t.flip(axis) if reverse else t
    if exclusive:
        t = torch.cat([torch.ones_like(t.narrow(axis, 0, 1)), t.narrow(axis, 0, t.shape[axis] - 1)], axis)
    c = t.cumprod(axis)
    return c.flip(axis) if reverse else c


@pytest.mark.parametrize("zeros", [0, 1, 2], ids=["no_zero", "one_zero", "two_zeros"])
@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod_grad_matches_autograd_with_zeros(exclusive: int, reverse: int, zeros: int) -> None:
    """Exact at zeros of x (one per line, or two), where dividing the product by x is not."""
    x, dy = f32(3, 6, 2, low=0.5, high=1.5) * rng.choice([-1, 1], (3, 6, 2)).astype(np.float32), f32(3, 6, 2)
    for k in range(zeros):
        x[:, [1, 4][k], 0] = 0
    (dx,) = run_op("CumProdGrad", [dy, x, np.array(1, np.int64)], 1, {"exclusive": exclusive, "reverse": reverse},
                   params=[2])
    assert rel(dx, autograd(lambda t: _torch_cumprod(t, 1, exclusive, reverse), dy, x)[0]) < TOL


@pytest.mark.parametrize("rank", ["invertible", "singular"])
def test_det_grad_matches_autograd(rank: str) -> None:
    x, dy = f32(2, 3, 4, 4), f32(2, 3)
    if rank == "singular":                 # rank M - 1: the cofactors are not zero, A^-1 does not exist
        x[..., 3] = x[..., 0] + x[..., 1]
    (dx,) = run_op("DetGrad", [dy, x], 1)
    assert rel(dx, autograd(torch.linalg.det, dy, x)[0]) < 1e-4


@pytest.mark.parametrize("reduction", [0, 1, 2], ids=["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("ignore", [None, 2], ids=["all", "ignore_2"])
def test_nll_loss_grad_matches_autograd(reduction: int, weighted: bool, ignore: int | None) -> None:
    names = {fb.LossReduction.NONE: "none", fb.LossReduction.SUM: "sum", fb.LossReduction.MEAN: "mean"}
    x, target = f32(4, 5, 3), rng.integers(0, 5, (4, 3)).astype(np.int64)
    weight = f32(5, low=0.2, high=2.0) if weighted else None
    kind = [fb.LossReduction.NONE, fb.LossReduction.SUM, fb.LossReduction.MEAN][reduction]
    dy = f32(4, 3) if kind == fb.LossReduction.NONE else f32()
    attrs = {"reduction": kind, "ignore_index": ignore or 0, "has_ignore_index": ignore is not None}
    (dx,) = run_op("NLLLossGrad", [dy, x, target] + ([weight] if weighted else []), 1, attrs)

    def fn(t: torch.Tensor) -> torch.Tensor:
        w = None if weight is None else torch.tensor(weight, dtype=torch.float64)
        return F.nll_loss(t, torch.tensor(target), weight=w, reduction=names[kind],
                          ignore_index=-100 if ignore is None else ignore)
    assert rel(dx, autograd(fn, dy, x)[0]) < TOL


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_loss_bprop_matches_autograd(reduction: str) -> None:
    """SoftmaxCrossEntropyLoss (LogSoftmax + NLLLoss) with class weights and ignore_index, in a model trained
    through it (MSE on its loss output): the weight gradient against PyTorch's cross_entropy."""
    from onnx import helper, numpy_helper
    weights = {"w": f32(5, 4)}
    x = f32(6, 5)
    target, class_weight = np.array([0, 1, 3, 2, 3, 1], np.int64), f32(4, low=0.5, high=2.0)
    labels = f32(6) if reduction == "none" else f32()
    consts = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v, n))
              for n, v in (("t", target), ("cw", class_weight))]
    nodes = [*consts, helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["h", "t", "cw"], ["y"], reduction=reduction,
                              ignore_index=2)]

    def fn(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(t @ w, torch.tensor(target), weight=torch.tensor(class_weight, dtype=torch.float64),
                               ignore_index=2, reduction=reduction)
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))


def test_cumprod_det_and_hardmax_bprop_match_autograd() -> None:
    """x @ w -> CumProd -> reshape to 2x2 matrices -> Det, plus a Hardmax branch whose gradient is zero."""
    from onnx import helper, numpy_helper
    weights = {"w": f32(3, 8, low=-1, high=1)}
    x, labels = f32(2, 3), f32(2, 2)
    consts = [helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v, n))
              for n, v in (("axis", np.array(1, np.int64)), ("shape", np.array([2, 2, 2, 2], np.int64)))]
    nodes = [*consts, helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("CumProd", ["h", "axis"], ["c"]),
             helper.make_node("Reshape", ["c", "shape"], ["m"]), helper.make_node("Det", ["m"], ["d"]),
             helper.make_node("Hardmax", ["d"], ["hm"], axis=1), helper.make_node("Add", ["d", "hm"], ["y"])]

    def fn(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        d = torch.linalg.det((t @ w).cumprod(1).reshape(2, 2, 2, 2))
        return d + F.one_hot(d.argmax(1), 2).to(d.dtype)
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))


def test_erf_gelu_bprop_matches_autograd() -> None:
    """GELU as torch.onnx.export writes it, 0.5 * h * (1 + erf(h / sqrt 2)), trained through its Erf."""
    from onnx import helper
    weights = {"w": f32(5, 6)}
    x, labels = f32(4, 5), f32(4, 6)
    consts = [helper.make_node("Constant", [], [n], value_float=v) for n, v in (("r2", 2 ** 0.5), ("one", 1.0),
                                                                                ("half", 0.5))]
    nodes = [*consts, helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Div", ["h", "r2"], ["s"]),
             helper.make_node("Erf", ["s"], ["e"]), helper.make_node("Add", ["e", "one"], ["a"]),
             helper.make_node("Mul", ["h", "a"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    fn = lambda t, w: F.gelu(t @ w)  # noqa: E731
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))


@pytest.mark.parametrize("slope_shape", [(3, 1, 1), (1,), (2, 3, 4, 5)], ids=["per_channel", "shared", "full"])
def test_prelu_grad_matches_autograd(slope_shape: tuple[int, ...]) -> None:
    x, dy, slope = f32(2, 3, 4, 5), f32(2, 3, 4, 5), f32(*slope_shape, low=0.05, high=0.5)
    dx, dslope = run_op("PReLUGrad", [dy, x, slope], 2)
    want_x, want_slope = autograd(lambda a, s: torch.where(a >= 0, a, s * a), dy, x, slope)
    assert rel(dx, want_x) < TOL and rel(dslope, want_slope) < TOL


def test_prelu_bprop_trains_the_slope_like_autograd() -> None:
    from onnx import helper
    weights = {"w": f32(5, 6), "slope": f32(6, low=0.05, high=0.5)}
    x, labels = f32(4, 5), f32(4, 6)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("PRelu", ["h", "slope"], ["y"])]
    fn = lambda t, w, slope: F.prelu(t @ w, slope)  # noqa: E731
    _assert_same_gradients(_training_step(nodes, weights, x, labels), _torch_gradients(fn, weights, x, labels))
