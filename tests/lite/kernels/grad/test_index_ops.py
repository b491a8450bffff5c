"""Gradients through Expand, Tile, GatherElements, GatherND, ScatterElements and ScatterND: each weight, scaled
by a graph input of its shape (so that the op is not folded away), passes through the op, and the first training
step's weight gradients under an MSE loss are checked against PyTorch autograd (float64)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert_for_training
from converter.train.config import TrainParams
from lite.status import NotSupportedError
from tests.oracles.torch_autograd import rel, t64

RNG = np.random.default_rng(3)


def f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-2, 2, shape).astype(np.float32)


def op_model(op: str, weights: dict[str, np.ndarray], consts: dict[str, np.ndarray], order: list[str],
             out_shape: list[int], **attrs) -> onnx.ModelProto:
    """pred = op(*order) with every weight w read as w * s_w (s_w a graph input); constants as initializers."""
    scaled = [helper.make_node("Mul", [w, f"s_{w}"], [f"{w}_scaled"]) for w in weights]
    order = [f"{n}_scaled" if n in weights else n for n in order]
    graph = helper.make_graph(
        [*scaled, helper.make_node(op, order, ["pred"], name="op", **attrs)], "g",
        [helper.make_tensor_value_info(f"s_{w}", TensorProto.FLOAT, v.shape) for w, v in weights.items()],
        [helper.make_tensor_value_info("pred", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v, n) for n, v in (weights | consts).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10)


def check(m: onnx.ModelProto, weights: dict[str, np.ndarray], fn: Callable[..., torch.Tensor],
          out_shape: list[int]) -> None:
    scales, labels = {w: f32(*v.shape) for w, v in weights.items()}, f32(*out_shape)
    buf = convert_for_training(m, TrainParams(loss="mse"))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    for w, s in scales.items():
        session.GetInputsByTensorName(f"s_{w}").set_data(s)
    session.GetInputsByTensorName("labels").set_data(labels)
    session.RunGraph()
    ours = {t.tensor_name(): t.numpy() for t in session.GetGradients()}
    ts = {n: t64(w) for n, w in weights.items()}
    F.mse_loss(fn(*(t * t64(scales[n], False) for n, t in ts.items())), t64(labels, False)).backward()
    for name, t in ts.items():
        assert rel(ours[name], t.grad) < 1e-5, name


def test_expand():
    w = {"w": f32(3, 1)}
    m = op_model("Expand", w, {"s": np.array([2, 3, 4], np.int64)}, ["w", "s"], [2, 3, 4])
    check(m, w, lambda a: a.expand(2, 3, 4), [2, 3, 4])


def test_tile():
    w = {"w": f32(2, 3)}
    m = op_model("Tile", w, {"r": np.array([3, 2], np.int64)}, ["w", "r"], [6, 6])
    check(m, w, lambda a: a.repeat(3, 2), [6, 6])


@pytest.mark.parametrize("axis, idx", [(0, np.array([[0, 3, 0], [-1, 2, 0]], np.int64)),
                                       (1, np.array([4, 0, 4, 1], np.int32)), (2, np.array(1, np.int64))],
                         ids=["rank2_indices_negative", "axis1_int32", "scalar_index"])
def test_gather_with_repeated_indices(axis, idx):
    """An embedding lookup's gradient: dy scatter-added at the indices (repeats accumulate)."""
    w = {"w": f32(4, 5, 3)}
    out = [4, 5, 3]
    out[axis:axis + 1] = idx.shape
    m = op_model("Gather", w, {"i": idx}, ["w", "i"], out, axis=axis)
    t = torch.from_numpy(idx.astype(np.int64))
    check(m, w, lambda a: a.movedim(axis, 0)[t].movedim(list(range(t.ndim)), list(range(axis, axis + t.ndim))), out)


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_with_repeated_indices(axis):
    w = {"w": f32(4, 5)}
    idx = RNG.integers(0, [4, 5][axis], [3, 5] if axis == 0 else [4, 3])
    m = op_model("GatherElements", w, {"i": idx}, ["w", "i"], list(idx.shape), axis=axis)
    check(m, w, lambda a: torch.gather(a, axis, torch.from_numpy(idx)), list(idx.shape))


def test_gather_nd_with_repeated_indices():
    w = {"w": f32(4, 5, 3)}
    idx = np.array([[[0, 1], [3, 4]], [[0, 1], [2, -1]]], np.int64)
    m = op_model("GatherND", w, {"i": idx}, ["w", "i"], [2, 2, 3])
    t = torch.from_numpy(idx)
    check(m, w, lambda a: a[t[..., 0], t[..., 1]], [2, 2, 3])


def test_gather_nd_with_batch_dims():
    w = {"w": f32(2, 4, 3)}
    idx = RNG.integers(0, 4, [2, 5, 1]).astype(np.int32)
    m = op_model("GatherND", w, {"i": idx}, ["w", "i"], [2, 5, 3], batch_dims=1)
    t = torch.from_numpy(idx.astype(np.int64))
    check(m, w, lambda a: a[torch.arange(2)[:, None], t[..., 0]], [2, 5, 3])


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements(reduction):
    """Distinct indices without a reduction (duplicates would leave any one update), repeated ones with add."""
    w = {"data": f32(4, 5), "updates": f32(2, 5)}
    idx = np.argsort(RNG.random([4, 5]), axis=0)[:2] if reduction == "none" else RNG.integers(0, 4, [2, 5])
    m = op_model("ScatterElements", w, {"i": idx}, ["data", "i", "updates"], [4, 5], axis=0, reduction=reduction)
    t = torch.from_numpy(idx)
    fn = (lambda d, u: d.scatter(0, t, u)) if reduction == "none" else (lambda d, u: d.scatter_add(0, t, u))
    check(m, w, fn, [4, 5])


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd(reduction):
    w = {"data": f32(4, 3, 2), "updates": f32(3, 2)}
    idx = np.array([[0, 1], [3, 2], [0, 1] if reduction == "add" else [1, 0]], np.int64)
    m = op_model("ScatterND", w, {"i": idx}, ["data", "i", "updates"], [4, 3, 2], reduction=reduction)
    t = torch.from_numpy(idx)
    check(m, w, lambda d, u: d.index_put((t[:, 0], t[:, 1]), u, accumulate=reduction == "add"), [4, 3, 2])


def test_scatter_with_a_product_is_not_trained_through():
    w = {"data": f32(4, 5), "updates": f32(2, 5)}
    m = op_model("ScatterElements", w, {"i": np.zeros([2, 5], np.int64)}, ["data", "i", "updates"], [4, 5],
                 reduction="mul")
    with pytest.raises(NotSupportedError, match="only scatters without a reduction or with add"):
        convert_for_training(m, TrainParams(loss="mse"))
