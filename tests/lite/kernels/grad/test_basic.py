"""Elementwise and shape gradient kernels, losses and optimizers, each driven directly and checked against
PyTorch autograd / torch.optim (or, for index bookkeeping torch cannot express, a numpy adjoint)."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lite.compiler import compile_graph, fold_or_infer, infer_node, select_kernel
from lite.dtypes import DataType
from lite.kernel import TensorSpec
from lite.model import Model, NodeDef, TensorDef
from lite.status import InputTensorError, NotSupportedError
from schema import attrs as op_attrs
from schema import fb
from tests.oracles.torch_autograd import autograd, rel, t64

R = fb.ReduceMode
rng = np.random.default_rng(0)


def f32(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def node_of(op: str, n_in: int, n_out: int, attrs: dict[str, Any] | None = None,
            omitted: Sequence[int] = ()) -> NodeDef:
    return NodeDef(op, op, op_attrs.build(op, attrs or {}), [-1 if i in omitted else i for i in range(n_in)],
                   list(range(n_in, n_in + n_out)))


def run_op(op: str, inputs: Sequence[np.ndarray | None], n_out: int, attrs: dict[str, Any] | None = None,
           params: Sequence[int] = ()) -> list[np.ndarray]:
    """Compile and run one node as a plan would: runtime inputs have no compile-time value (only the `params`
    indices do); outputs and scratch start as NaN so an element the kernel forgets to write shows."""
    node = node_of(op, len(inputs), n_out, attrs, [i for i, a in enumerate(inputs) if a is None])
    specs = [None if a is None else TensorSpec(a.shape, a.dtype, a if i in params else None)
             for i, a in enumerate(inputs)]
    kernel = select_kernel(node, specs)
    outs = infer_node(kernel, node, specs)
    arrays = [np.full(s.shape, np.nan, s.dtype) for s in outs]
    scratch = [np.full(s.shape, np.nan, s.dtype) for s in kernel.scratch()]
    kernel.bind(list(inputs), arrays, scratch)
    kernel.run(list(inputs), arrays)
    return arrays


# ---- elementwise ---------------------------------------------------------------------------------------------
BINARY = {"AddGrad": torch.add, "SubGrad": torch.sub, "MulGrad": torch.mul, "DivGrad": torch.div,
          "PowGrad": torch.pow, "MaximumGrad": torch.maximum, "MinimumGrad": torch.minimum}
SHAPES = [((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((1, 3, 1), (2, 3, 4)), ((3, 4), (3, 4)), ((), (2, 3))]


def operands(op: str, sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    if op in ("MaximumGrad", "MinimumGrad"):     # small integers: many ties
        return (rng.integers(-2, 3, sa).astype(np.float32), rng.integers(-2, 3, sb).astype(np.float32))
    if op == "PowGrad":
        return f32(*sa, low=0.5, high=2.0), f32(*sb)
    if op == "DivGrad":
        return f32(*sa), f32(*sb, low=0.5, high=2.0) * rng.choice([-1, 1], sb).astype(np.float32)
    return f32(*sa), f32(*sb)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
@pytest.mark.parametrize("op", BINARY)
def test_binary_grad_matches_autograd_with_broadcast_reduction(op: str, shapes: tuple) -> None:
    a, b = operands(op, *shapes)
    dy = f32(*np.broadcast_shapes(a.shape, b.shape))
    da, db = run_op(op, [dy, a, b], 2)
    want_a, want_b = autograd(BINARY[op], dy, a, b)
    assert rel(da, want_a) < 1e-5 and rel(db, want_b) < 1e-5


def test_pow_grad_is_zero_where_autograd_defines_it_so() -> None:
    a = np.array([0.0, 0.0, 2.0, 0.0], np.float32)
    b = np.array([0.0, 2.0, 0.0, 1.0], np.float32)
    dy = np.ones(4, np.float32)
    da, db = run_op("PowGrad", [dy, a, b], 2)
    want_a, want_b = autograd(torch.pow, dy, a, b)
    np.testing.assert_allclose(da, want_a.numpy(), rtol=1e-6)
    np.testing.assert_allclose(db, want_b.numpy(), rtol=1e-6)


UNARY = {"NegGrad": (torch.neg, None), "SqrtGrad": (torch.sqrt, "y"), "ExpGrad": (torch.exp, "y"),
         "LogGrad": (torch.log, "x"), "AbsGrad": (torch.abs, "x"), "ErfGrad": (torch.erf, "x")}


@pytest.mark.parametrize("op", UNARY)
def test_unary_grad_matches_autograd(op: str) -> None:
    fn, second = UNARY[op]
    x = f32(3, 5, low=0.1, high=3.0) if op in ("SqrtGrad", "LogGrad") else f32(3, 5)
    if op == "AbsGrad":
        x[0, :2] = 0                                      # the subgradient at 0 is 0
    dy = f32(3, 5)
    y = fn(torch.tensor(x)).numpy()
    inputs = [dy] + ([] if second is None else [y if second == "y" else x])
    (dx,) = run_op(op, inputs, 1)
    assert rel(dx, autograd(fn, dy, x)[0]) < 1e-5


def test_grad_kernel_folds_when_every_input_is_known() -> None:
    dy, a, b = f32(2, 3), f32(2, 3), f32(3)
    node = node_of("MulGrad", 3, 2)
    specs, kernel = fold_or_infer(node, [TensorSpec(x.shape, x.dtype, x) for x in (dy, a, b)])
    assert kernel is None
    np.testing.assert_allclose(specs[1].value, (dy * a).sum(0), rtol=1e-6)


def test_pow_grad_takes_an_integer_exponent() -> None:
    a, b, dy = f32(2, 3, low=0.5), np.array([2, 3, 0], np.int64), f32(2, 3)
    da, db = run_op("PowGrad", [dy, a, b], 2)
    want_a, want_b = autograd(torch.pow, dy, a, b.astype(np.float32))
    assert rel(da, want_a) < 1e-5 and rel(db, want_b) < 1e-5


def test_grad_kernels_compute_in_place_in_a_compiled_plan() -> None:
    """Neg -> AbsGrad -> ReshapeGrad: the planner gives all three outputs one buffer, the result stays right."""
    def tensor(i: int, name: str, dims: tuple[int, ...]) -> TensorDef:
        return TensorDef(i, name, fb.NodeType.PARAMETER if i < 3 else fb.NodeType.CNODE, DataType.FLOAT32, dims,
                         fb.Format.ND)
    tensors = [tensor(0, "dy", (2, 6)), tensor(1, "x", (2, 6)), tensor(2, "target", (3, 4)),
               tensor(3, "neg", (2, 6)), tensor(4, "dx", (2, 6)), tensor(5, "out", (3, 4))]
    nodes = [NodeDef("neg", "Neg", op_attrs.build("Neg", {}), [0], [3]),
             NodeDef("abs_grad", "AbsGrad", op_attrs.build("AbsGrad", {}), [3, 1], [4]),
             NodeDef("reshape_grad", "ReshapeGrad", op_attrs.build("ReshapeGrad", {}), [4, 2], [5])]
    model = Model("m", "", tensors, nodes, [0, 1, 2], [5])
    plan = compile_graph(model, {0: (2, 6), 1: (2, 6), 2: (3, 4)})
    dy, x = f32(2, 6), f32(2, 6)
    np.copyto(plan.arrays[0], dy)
    np.copyto(plan.arrays[1], x)
    for step in plan.steps:
        step.kernel.run(step.inputs, step.outputs)
    assert np.shares_memory(plan.arrays[3], plan.arrays[5])
    np.testing.assert_array_equal(plan.arrays[5], (-dy * np.sign(x)).reshape(3, 4))


# ---- shape ops -----------------------------------------------------------------------------------------------
def test_reshape_grad_gives_dy_in_the_input_shape() -> None:
    x, dy = f32(2, 3, 4), f32(6, 4)
    (dx,) = run_op("ReshapeGrad", [dy, x], 1)
    assert rel(dx, autograd(lambda t: t.reshape(6, 4), dy, x)[0]) == 0


@pytest.mark.parametrize("axis", [1, -2])
def test_concat_grad_cuts_dy_at_the_input_sizes(axis: int) -> None:
    xs = [f32(2, 3, 4), f32(2, 1, 4), f32(2, 2, 4)]
    dy = f32(2, 6, 4)
    grads = run_op("ConcatGrad", [dy, *xs], 3, {"axis": axis})
    for got, want in zip(grads, autograd(lambda *ts: torch.cat(ts, axis), dy, *xs)):
        assert rel(got, want) == 0


@pytest.mark.parametrize("sizes, omitted", [([2, 4], {1}), ([1, 2, 3], {1}), ([2, 2, 2], {0, 2}), ([3, 3], set())])
def test_split_grad_joins_dys_with_zeros_for_unused_parts(sizes: list[int], omitted: set[int]) -> None:
    x = f32(2, 6, 3)
    dys = [None if k in omitted else f32(2, s, 3) for k, s in enumerate(sizes)]
    (dx,) = run_op("SplitGrad", [x, *dys], 1, {"axis": 1})
    xt = t64(x)
    parts = torch.split(xt, sizes, 1)
    sum((p * torch.tensor(d, dtype=torch.float64)).sum() for p, d in zip(parts, dys) if d is not None).backward()
    assert rel(dx, xt.grad) == 0


@pytest.mark.parametrize("starts, ends, axes, steps, index", [
    ([1, 0], [3, 4], [0, 2], None, np.s_[1:3, :, 0:4]),
    ([1, -1], [4, 0], [0, 2], [2, -2], np.s_[1:4:2, :, -1:0:-2]),
    ([-100, 2], [100, -1], [-1, 1], [3, 1], np.s_[:, 2:-1, ::3]),
], ids=["plain", "negative-step", "clamped"])
def test_slice_grad_scatters_dy_back_where_slice_read(starts, ends, axes, steps, index) -> None:
    x = f32(4, 5, 6)
    positions = np.arange(x.size).reshape(x.shape)[index]
    dy = f32(*positions.shape)
    expected = np.zeros(x.size, np.float32)
    np.add.at(expected, positions.ravel(), dy.ravel())    # the adjoint of x -> x[index]
    ints = [np.array(v, np.int64) for v in (starts, ends, axes)] + ([np.array(steps, np.int64)] if steps else [])
    (dx,) = run_op("SliceGrad", [dy, x, *ints], 1, params=range(2, 2 + len(ints)))
    np.testing.assert_array_equal(dx, expected.reshape(x.shape))


@pytest.mark.parametrize("pads", [[0, 1, 2, 1, 0, 3], [1, 0, -1, 0, 2, -2]], ids=["grow", "crop"])
def test_pad_grad_matches_autograd_of_constant_pad(pads: list[int]) -> None:
    x = f32(2, 3, 4)
    begins, ends = pads[:3], pads[3:]
    torch_pads = [p for axis in reversed(range(3)) for p in (begins[axis], ends[axis])]
    dy = f32(*(n + b + e for n, b, e in zip(x.shape, begins, ends)))
    (dx,) = run_op("PadGrad", [dy, x, np.array(pads, np.int64)], 1, params=[2])
    assert rel(dx, autograd(lambda t: F.pad(t, torch_pads), dy, x)[0]) == 0


REDUCE = {R.SUM: torch.sum, R.MEAN: torch.mean, R.MAX: torch.amax, R.MIN: torch.amin}


@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("axes", [[1], [0, -1], None], ids=str)
@pytest.mark.parametrize("mode", REDUCE, ids=["mean", "sum", "max", "min"])
def test_reduce_grad_matches_autograd(mode: int, axes: list[int] | None, keep: bool) -> None:
    x = rng.integers(-2, 3, (3, 4, 5)).astype(np.float32)     # ties for max / min
    dims = tuple(axes) if axes else (0, 1, 2)
    y = REDUCE[mode](torch.tensor(x), dim=dims, keepdim=keep).numpy()
    dy = f32(*y.shape)
    inputs = [dy, x, y] + ([np.array(axes, np.int64)] if axes else [])
    (dx,) = run_op("ReduceGrad", inputs, 1, {"mode": mode, "keep_dims": keep}, params=[3])
    assert rel(dx, autograd(lambda t: REDUCE[mode](t, dim=dims, keepdim=keep), dy, x)[0]) < 1e-6


# ---- losses --------------------------------------------------------------------------------------------------
def loss_check(op: str, pred: np.ndarray, labels: np.ndarray, torch_loss: Callable[..., torch.Tensor],
               attrs: dict[str, Any] | None = None) -> None:
    loss, dpred = run_op(op, [pred, labels], 2, attrs)
    p = t64(pred)
    want = torch_loss(p, torch.tensor(labels if labels.dtype.kind == "f" else labels.astype(np.int64)))
    want.backward()
    assert loss.shape == () and dpred.shape == pred.shape
    assert rel(loss, want) < 1e-5 and rel(dpred, p.grad) < 1e-5


def test_softmax_cross_entropy_with_soft_labels() -> None:
    logits = f32(5, 7) * 30                                      # large: the max shift matters
    labels = torch.softmax(torch.tensor(f32(5, 7)), 1).numpy()
    loss_check("SoftmaxCrossEntropyWithLogits", logits, labels, F.cross_entropy)


def test_softmax_cross_entropy_with_one_hot_labels() -> None:
    logits = f32(6, 4)
    labels = np.eye(4, dtype=np.float32)[rng.integers(0, 4, 6)]
    loss_check("SoftmaxCrossEntropyWithLogits", logits, labels, F.cross_entropy)


def test_sparse_softmax_cross_entropy() -> None:
    logits = f32(8, 10) * 30
    labels = rng.integers(0, 10, 8).astype(np.int32)
    loss_check("SparseSoftmaxCrossEntropyWithLogits", logits, labels, F.cross_entropy)


def test_binary_cross_entropy_with_logits_is_stable() -> None:
    logits = f32(4, 3) * 10
    logits[0] = [-100.0, 100.0, 0.0]
    targets = rng.uniform(0, 1, (4, 3)).astype(np.float32)
    loss_check("BinaryCrossEntropy", logits, targets, F.binary_cross_entropy_with_logits)


@pytest.mark.parametrize("beta", [1.0, 0.5, 0.0])
def test_smooth_l1_loss(beta: float) -> None:
    pred, target = f32(4, 5), f32(4, 5)
    loss_check("SmoothL1Loss", pred, target, lambda p, t: F.smooth_l1_loss(p, t, beta=beta), {"beta": beta})


def test_mse_loss() -> None:
    loss_check("MSELoss", f32(3, 4, 2), f32(3, 4, 2), F.mse_loss)


@pytest.mark.parametrize("bad", [10, -1])
def test_sparse_labels_out_of_range_raise_input_tensor_error(bad: int) -> None:
    labels = np.array([1, bad, 3], np.int32)
    with pytest.raises(InputTensorError, match="labels"):
        run_op("SparseSoftmaxCrossEntropyWithLogits", [f32(3, 10), labels], 2)


@pytest.mark.parametrize("op, labels", [
    ("SparseSoftmaxCrossEntropyWithLogits", np.zeros((3, 1), np.int32)),
    ("SparseSoftmaxCrossEntropyWithLogits", np.zeros(3, np.float32)),
    ("SoftmaxCrossEntropyWithLogits", np.zeros(3, np.int32)),
    ("SoftmaxCrossEntropyWithLogits", np.zeros((3, 9), np.float32)),
    ("MSELoss", np.zeros((3, 10, 1), np.float32)),
])
def test_labels_of_the_wrong_shape_or_dtype_raise_input_tensor_error(op: str, labels: np.ndarray) -> None:
    with pytest.raises(InputTensorError, match="labels"):
        run_op(op, [f32(3, 10), labels], 2)


def test_nan_logits_give_a_nan_loss_not_an_error() -> None:
    logits = f32(2, 3)
    logits[1, 1] = np.nan
    loss, _ = run_op("SparseSoftmaxCrossEntropyWithLogits", [logits, np.array([0, 2], np.int32)], 2)
    assert np.isnan(loss)


# ---- optimizers ----------------------------------------------------------------------------------------------
LR = float(np.float32(0.05))
STEPS = 5


class Optimizer:
    """One optimizer node over writable weight / state arrays, stepped like the session's optimizer plan."""

    def __init__(self, op: str, attrs: dict[str, Any], w: np.ndarray, arrays: dict[str, np.ndarray]):
        self.w, self.arrays = w.copy(), {k: v.copy() for k, v in arrays.items()}
        self.grad, self.lr = np.zeros_like(w), np.array(LR, np.float32)
        order = {"Sgd": ["w", "grad", "lr", "accum", "stat"], "ApplyMomentum": ["w", "accum", "lr", "grad"],
                 "Adam": ["w", "m", "v", "step", "lr", "grad"]}[op]
        named = {"w": self.w, "grad": self.grad, "lr": self.lr, **self.arrays}
        self.inputs = [named[k] for k in order]
        node = node_of(op, len(order), 0, attrs)
        specs = [TensorSpec(a.shape, a.dtype) for a in self.inputs]
        specs_out, self.kernel = fold_or_infer(node, specs)
        assert specs_out == [] and self.kernel is not None
        self.kernel.bind(self.inputs, [], [np.full(s.shape, np.nan, s.dtype) for s in self.kernel.scratch()])

    def step(self, grad: np.ndarray) -> None:
        np.copyto(self.grad, grad)
        self.kernel.run(self.inputs, [])


def state(op: str, w: np.ndarray) -> dict[str, np.ndarray]:
    zeros = np.zeros_like(w)
    if op == "Adam":
        return {"m": zeros, "v": zeros, "step": np.zeros((), np.float32)}
    return {"accum": zeros, "stat": np.ones((), np.float32)}


def run_both(op: str, attrs: dict[str, Any], torch_opt: Callable[[list[torch.Tensor]], torch.optim.Optimizer],
             grads: list[np.ndarray]) -> tuple[Optimizer, torch.Tensor, torch.optim.Optimizer]:
    w = f32(4, 6)
    ours = Optimizer(op, attrs, w, state(op, w))
    p = torch.tensor(w, requires_grad=True)
    opt = torch_opt([p])
    for g in grads:
        ours.step(g)
        p.grad = torch.tensor(g)
        opt.step()
    return ours, p, opt


SGD_CASES = [dict(), dict(momentum=0.9), dict(momentum=0.9, dampening=0.3), dict(momentum=0.9, nesterov=True),
             dict(momentum=0.8, weight_decay=0.01), dict(weight_decay=0.1),
             dict(momentum=0.9, dampening=0.5, weight_decay=0.01)]


@pytest.mark.parametrize("hp", SGD_CASES, ids=lambda hp: ",".join(f"{k}={v}" for k, v in hp.items()) or "plain")
def test_sgd_matches_torch_sgd(hp: dict[str, Any]) -> None:
    grads = [f32(4, 6) for _ in range(STEPS)]
    ours, p, opt = run_both("Sgd", hp, lambda ps: torch.optim.SGD(ps, lr=LR, **hp), grads)
    assert rel(ours.w, p) < 1e-6
    if hp.get("momentum"):
        assert rel(ours.arrays["accum"], opt.state[p]["momentum_buffer"]) < 1e-6


def test_sgd_buffer_that_starts_at_zero_is_not_restarted() -> None:
    grads = [np.zeros((4, 6), np.float32)] + [f32(4, 6) for _ in range(STEPS - 1)]
    hp = dict(momentum=0.9, dampening=0.5)
    ours, p, _ = run_both("Sgd", hp, lambda ps: torch.optim.SGD(ps, lr=LR, **hp), grads)
    assert rel(ours.w, p) < 1e-6


def test_sgd_state_lives_in_its_tensors() -> None:
    """A new kernel on copies of the arrays (a checkpoint reloaded) continues exactly."""
    grads = [f32(4, 6) for _ in range(STEPS)]
    hp = dict(momentum=0.9, dampening=0.3)
    first = Optimizer("Sgd", hp, f32(4, 6), state("Sgd", np.zeros((4, 6), np.float32)))
    w0 = first.w.copy()
    for g in grads[:2]:
        first.step(g)
    resumed = Optimizer("Sgd", hp, first.w, first.arrays)
    for g in grads[2:]:
        resumed.step(g)
    p = torch.tensor(w0, requires_grad=True)
    opt = torch.optim.SGD([p], lr=LR, **hp)
    for g in grads:
        p.grad = torch.tensor(g)
        opt.step()
    assert rel(resumed.w, p) < 1e-6


@pytest.mark.parametrize("hp", [dict(momentum=0.9), dict(momentum=0.9, use_nesterov=True),
                                dict(momentum=0.5, weight_decay=0.01)], ids=str)
def test_apply_momentum_matches_torch_sgd(hp: dict[str, Any]) -> None:
    grads = [f32(4, 6) for _ in range(STEPS)]
    torch_hp = dict(momentum=hp["momentum"], nesterov=hp.get("use_nesterov", False),
                    weight_decay=hp.get("weight_decay", 0.0))
    ours, p, opt = run_both("ApplyMomentum", hp, lambda ps: torch.optim.SGD(ps, lr=LR, **torch_hp), grads)
    assert rel(ours.w, p) < 1e-6
    assert rel(ours.arrays["accum"], opt.state[p]["momentum_buffer"]) < 1e-6


@pytest.mark.parametrize("hp, torch_cls", [
    (dict(), torch.optim.Adam), (dict(beta1=0.8, beta2=0.99, epsilon=1e-6), torch.optim.Adam),
    (dict(weight_decay=0.01), torch.optim.AdamW)], ids=["adam", "adam-betas", "adamw"])
def test_adam_matches_torch(hp: dict[str, Any], torch_cls: type) -> None:
    grads = [f32(4, 6) for _ in range(STEPS)]
    torch_hp = dict(betas=(hp.get("beta1", 0.9), hp.get("beta2", 0.999)), eps=hp.get("epsilon", 1e-8),
                    weight_decay=hp.get("weight_decay", 0.0))
    ours, p, opt = run_both("Adam", hp, lambda ps: torch_cls(ps, lr=LR, **torch_hp), grads)
    assert rel(ours.w, p) < 1e-6
    assert rel(ours.arrays["m"], opt.state[p]["exp_avg"]) < 1e-6
    assert rel(ours.arrays["v"], opt.state[p]["exp_avg_sq"]) < 1e-6
    assert ours.arrays["step"] == STEPS


def test_learning_rate_is_read_at_every_step() -> None:
    w = f32(3)
    ours = Optimizer("Sgd", {}, w, state("Sgd", w))
    ours.lr[()] = 0.5
    ours.step(np.ones(3, np.float32))
    np.testing.assert_allclose(ours.w, w - 0.5, rtol=1e-6)


def test_assign_copies_the_value_into_the_variable() -> None:
    variable, value = np.zeros((2, 3), np.float32), f32(2, 3)
    node = node_of("Assign", 2, 0)
    _, kernel = fold_or_infer(node, [TensorSpec(a.shape, a.dtype) for a in (variable, value)])
    kernel.bind([variable, value], [], [])
    kernel.run([variable, value], [])
    np.testing.assert_array_equal(variable, value)


def test_optimizer_refuses_a_read_only_weight() -> None:
    w = f32(3)
    w.flags.writeable = False
    inputs = [w, f32(3), np.array(LR, np.float32), np.zeros(3, np.float32), np.ones((), np.float32)]
    _, kernel = fold_or_infer(node_of("Sgd", 5, 0), [TensorSpec(a.shape, a.dtype) for a in inputs])
    with pytest.raises(NotSupportedError, match="writable"):
        kernel.bind(inputs, [], [np.empty(3, np.float32)])
