"""PyTorch autograd as the oracle of the gradient tests (float64), and the kink inputs that tell where a float32
run may take another branch of a piecewise-linear op than the exact one."""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


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


def _kink_distance(func: Callable, args: tuple, kwargs: dict) -> torch.Tensor | None:
    """Elementwise distance of a piecewise-linear op's input to its nearest kink (None for other ops); for a 2-D max
    pooling, per window, the gap between its two largest values (an exact float64 tie is no kink: it rounds alike)."""
    x = args[0]
    if func is torch.relu:
        return x.abs()
    if func is torch.Tensor.clamp:
        return torch.stack([(x - bound).abs() for bound in args[1:] if bound is not None]).amin(0)
    if func is F.hardswish:
        return torch.minimum((x + 3).abs(), (x - 3).abs())
    if func is F.max_pool2d:    # called with explicit stride, padding and dilation, floor mode
        kernel, padding = args[1], kwargs["padding"]
        pad_h, pad_w = padding if isinstance(padding, (list, tuple)) else (padding, padding)
        padded = F.pad(x, [pad_w, pad_w, pad_h, pad_h], value=-torch.inf)
        windows = F.unfold(padded, kernel, kwargs["dilation"], 0, kwargs["stride"])
        top = windows.reshape(x.shape[0], x.shape[1], -1, windows.shape[-1]).topk(2, dim=2).values
        return torch.where(top[:, :, 0] == top[:, :, 1], torch.inf, top[:, :, 0] - top[:, :, 1])
    return None


class KinkInputs(TorchFunctionMode):
    """While active, records the input of every ReLU, clamp (Clip, HardSigmoid), HardSwish and 2-D max pooling call
    with its distance to the nearest kink: where float32 rounding crosses a kink, the gradient jumps."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[tuple[torch.Tensor, torch.Tensor]] = []

    def __torch_function__(self, func: Callable, types: tuple, args: tuple = (), kwargs: dict | None = None) -> object:
        kwargs = kwargs or {}
        distance = _kink_distance(func, args, kwargs)
        if distance is not None:
            self.records.append((args[0].detach(), distance.detach()))
        return func(*args, **kwargs)


def kink_margin(exact: KinkInputs, single: KinkInputs) -> float:
    """The smallest distance of an exact (float64) kink input to its kink, in rms float32 rounding errors of that
    op's input; the two runs of one model are paired call by call."""
    assert len(exact.records) == len(single.records)
    margins = [(distance.min() / (x32.double() - x64).square().mean().sqrt().clamp_min(1e-30)).item()
               for (x64, distance), (x32, _) in zip(exact.records, single.records)]
    return min(margins, default=float("inf"))
