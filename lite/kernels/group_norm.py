"""GroupNorm: y = (x - mean) * invstd * scale + bias with mean and invstd = 1 / sqrt(var + eps) taken per sample
over each group of consecutive channels and every axis but the batch axis 0 and the channel axis.

The tensor is viewed as [N, A, G, C/G, B] (A: the axes between batch and channel, B: those after; NCHW has
A = 1, NHWC B = 1), so one code path serves every layout and the to_nhwc pass may move the channel axis.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.unary import FLOAT_TYPES
from lite.status import InvalidOpAttrError
from lite.traits import AXIS, Layout, TrainMode, declare

STAT_AXES = (1, 3, 4)       # of the grouped view: the statistics run over these


def grouped_shape(shape: tuple[int, ...], axis: int, groups: int) -> tuple[int, int, int, int, int]:
    """[N, A, G, C/G, B] of a tensor with channels along `axis`."""
    a = int(np.prod(shape[1:axis], dtype=np.int64))
    b = int(np.prod(shape[axis + 1:], dtype=np.int64))
    return shape[0], a, groups, shape[axis] // groups, b


def check_group_attrs(kernel: Kernel, x: TensorSpec) -> tuple[int, int]:
    """(channel axis, groups) after checking them against x; the error names the node."""
    axis, groups = kernel.attrs.axis, kernel.attrs.num_groups
    if x.rank < 2 or not -x.rank < axis < x.rank or axis % x.rank == 0:
        raise kernel.error(f"axis {axis} must name a channel axis (not 0) of a rank-{x.rank} input",
                           InvalidOpAttrError)
    axis %= x.rank
    if groups < 1 or x.shape[axis] % groups:
        raise kernel.error(f"num_groups {groups} must be positive and divide the {x.shape[axis]} channels",
                           InvalidOpAttrError)
    return axis, groups


def group_statistics(x5: np.ndarray, epsilon: float, centered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """mean and invstd [N, 1, G, 1, 1] of the grouped view x5; `centered` receives x5 - mean."""
    count = x5.shape[1] * x5.shape[3] * x5.shape[4]
    mean = np.add.reduce(x5, axis=STAT_AXES, keepdims=True) / count
    np.subtract(x5, mean, out=centered)
    var = np.einsum("nagcb,nagcb->ng", centered, centered)[:, None, :, None, None] / count
    var += epsilon
    return mean, 1.0 / np.sqrt(var)


declare("GroupNorm", layout=Layout(AXIS, axis_default=1), train=TrainMode(outputs=("mean", "invstd")))


@register("GroupNorm", *FLOAT_TYPES)
class GroupNormKernel(Kernel):
    """inputs: x, scale [C], bias [C]; outputs: y, or y, mean, invstd ([N, num_groups], for GroupNormGrad)."""
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        axis, groups = check_group_attrs(self, x)
        params = inputs[1:3]
        if len(params) != 2 or any(p is None or p.shape != (x.shape[axis],) for p in params):
            raise self.error(f"needs scale and bias of shape [{x.shape[axis]}], got "
                             f"{[None if p is None else list(p.shape) for p in params]}")
        if len(self.node.outputs) not in (1, 3):
            raise self.error(f"has outputs y or y, mean, invstd, not {len(self.node.outputs)}")
        self.view = grouped_shape(x.shape, axis, groups)
        self.compute = np.dtype(np.float32) if x.dtype == np.float16 else x.dtype
        stat = TensorSpec((x.shape[0], groups), self.compute)
        return [TensorSpec(x.shape, x.dtype)] + [stat, stat] * (len(self.node.outputs) == 3)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x5 = inputs[0].reshape(self.view).astype(self.compute, copy=False)
        centered = np.empty(self.view, self.compute)
        mean, invstd = group_statistics(x5, self.attrs.epsilon, centered)
        _, _, g, cg, _ = self.view
        centered *= invstd
        centered *= inputs[1].reshape(1, 1, g, cg, 1)
        centered += inputs[2].reshape(1, 1, g, cg, 1)
        np.copyto(outputs[0].reshape(self.view), centered, casting="same_kind")
        if len(outputs) == 3:
            np.copyto(outputs[1], mean.reshape(outputs[1].shape))
            np.copyto(outputs[2], invstd.reshape(outputs[2].shape))
