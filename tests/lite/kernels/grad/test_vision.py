"""GridSampleGrad against PyTorch autograd of F.grid_sample (float64), driven as a compiled plan drives it, and the
bprop rule building it into a training graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from schema import fb
from tests.lite.kernels.grad.test_nn import f32, run_op
from tests.oracles.torch_autograd import autograd, rel

TOL = 1e-4
MODES = {"bilinear": fb.ResizeMode.LINEAR, "nearest": fb.ResizeMode.NEAREST, "bicubic": fb.ResizeMode.CUBIC}
PADDINGS = {"zeros": fb.PaddingFill.CONSTANT, "border": fb.PaddingFill.EDGE, "reflection": fb.PaddingFill.REFLECT}
CASES = [("bilinear", "zeros", False), ("bilinear", "zeros", True), ("bilinear", "border", False),
         ("bilinear", "reflection", False), ("bilinear", "reflection", True), ("nearest", "zeros", False),
         ("bicubic", "zeros", False), ("bicubic", "zeros", True), ("bicubic", "border", False)]


def _check(mode: str, padding: str, align: bool, x_shape: tuple[int, ...], out: tuple[int, ...], spread: float
           ) -> None:
    rank = len(x_shape) - 2
    x = f32(*x_shape)                                             # channels last
    grid = f32(x_shape[0], *out, rank, low=-spread, high=spread)
    dy = f32(x_shape[0], *out, x_shape[-1])
    dx, dgrid = run_op("GridSampleGrad", [dy, x, grid], 2,
                       dict(mode=MODES[mode], padding_mode=PADDINGS[padding], align_corners=align))
    to_first, to_last = [0, rank + 1, *range(1, rank + 1)], [0, *range(2, rank + 2), 1]

    def sample(xt: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
        y = F.grid_sample(xt.permute(*to_first), gt, mode=mode, padding_mode=padding, align_corners=align)
        return y.permute(*to_last)
    want_dx, want_dgrid = autograd(sample, dy, x, grid)
    assert rel(dx, want_dx) < TOL
    assert rel(dgrid, want_dgrid) < TOL if mode != "nearest" else np.abs(dgrid).max() == 0


@pytest.mark.parametrize("mode,padding,align", CASES)
def test_grid_sample_grad_2d_matches_autograd(mode: str, padding: str, align: bool) -> None:
    spread = 0.9 if padding == "reflection" and mode == "bicubic" else 1.3
    _check(mode, padding, align, (2, 5, 6, 3), (4, 7), spread)


@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_grid_sample_grad_3d_matches_autograd(padding: str) -> None:
    _check("bilinear", padding, False, (1, 4, 5, 3, 2), (3, 2, 4), 1.2)


def test_grid_sample_trains_inside_a_network_like_pytorch() -> None:
    """Conv -> GridSample -> Gemm built into a training graph (the bprop rule): the first step's gradients of
    every weight, the sampling grid included, equal PyTorch autograd's."""
    from onnx import TensorProto, helper, numpy_helper

    import lite
    from converter import convert_for_training
    from converter.train import TrainParams

    weights = {"w": f32(4, 3, 3, 3), "b": f32(4), "grid": f32(2, 3, 5, 2, low=-1.1, high=1.1),
               "fc_w": f32(5, 60), "fc_b": f32(5)}
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("GridSample", ["c", "grid"], ["s"], align_corners=0),
             helper.make_node("Flatten", ["s"], ["f"]),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "gs", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 6, 5])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [2, 5])],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    buf = convert_for_training(model, TrainParams())
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    x, labels = f32(2, 3, 6, 5), np.array([1, 3], np.int32)
    session.GetInputsByTensorName("input").set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    session.RunGraph()
    ours = {t.tensor_name(): t.numpy() for t in session.GetGradients()}

    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in weights.items()}
    c = F.conv2d(torch.tensor(x, dtype=torch.float64), t["w"], t["b"], padding=1)
    s = F.grid_sample(c, t["grid"], mode="bilinear", padding_mode="zeros", align_corners=False)
    F.cross_entropy(s.flatten(1) @ t["fc_w"].T + t["fc_b"], torch.tensor(labels).long()).backward()
    for name in weights:                                  # the grid is a trained weight too
        assert rel(ours[name], t[name].grad) < TOL, name
