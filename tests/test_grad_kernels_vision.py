"""GridSampleGrad against PyTorch autograd of F.grid_sample (float64), driven as a compiled plan drives it, and the
bprop rule building it into a training graph."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from schema import fb
from tests.test_grad_kernels_nn import f32, run_op
from tests.torch_oracle import autograd, rel

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
