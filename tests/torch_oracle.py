"""PyTorch autograd as the oracle of the gradient-kernel tests (float64)."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch


def t64(a: np.ndarray, grad: bool = True) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float64, requires_grad=grad)


def rel(actual: np.ndarray, expected: np.ndarray | torch.Tensor) -> float:
    """Norm-wise relative error: max |actual - expected| / max |expected|."""
    expected = expected.detach().numpy() if isinstance(expected, torch.Tensor) else np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    return float(np.abs(actual - expected).max() / max(np.abs(expected).max(), 1e-30))


def autograd(fn: Callable[..., torch.Tensor], dy: np.ndarray, *xs: np.ndarray) -> list[torch.Tensor]:
    """The gradients of <fn(xs), dy> with respect to every x, in float64."""
    ts = [t64(x) for x in xs]
    fn(*ts).backward(torch.tensor(dy, dtype=torch.float64))
    return [t.grad for t in ts]
