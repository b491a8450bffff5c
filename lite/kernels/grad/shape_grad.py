"""Gradients of the shape ops: ReshapeGrad, ConcatGrad, SplitGrad, SliceGrad, PadGrad, ReduceGrad. float32.

Each reuses its forward kernel's compile-time rule (the slice index, the pad placement, the reduced axes), so a
gradient cannot disagree with the forward on which elements went where.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.pad import crop_and_place
from lite.kernels.reduce import ReduceKernel
from lite.kernels.reshape import NewShapeKernel, normalize_axes
from lite.kernels.slice import SliceKernel
from lite.kernels.split import equal_parts
from lite.status import NotSupportedError
from schema import fb

Index = tuple[slice, ...]
M = fb.ReduceMode


def axis_parts(rank: int, axis: int, sizes: Sequence[int]) -> list[Index]:
    """Consecutive slices of `sizes` elements along `axis` of a rank-`rank` tensor."""
    starts = np.cumsum([0, *sizes]).tolist()
    return [(slice(None),) * axis + (slice(a, b),) + (slice(None),) * (rank - axis - 1)
            for a, b in zip(starts, starts[1:])]


@register("ReshapeGrad", DataType.FLOAT32)
class ReshapeGradKernel(NewShapeKernel):
    """inputs: dy, x (the forward input) -> dx: dy's elements in x's shape (Reshape, Flatten, Squeeze, Unsqueeze).
    Computed in place when the planner allows."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        return inputs[1].shape


@register("ConcatGrad", DataType.FLOAT32)
class ConcatGradKernel(Kernel):
    """inputs: dy, x0, x1, ... (the forward inputs) -> dx0, dx1, ...: dy cut along `axis` at the inputs' sizes."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, xs = inputs[0], inputs[1:]
        if len(xs) != len(self.node.outputs) or any(x is None for x in xs):
            raise self.error(f"takes dy and the {len(self.node.outputs)} forward inputs, got {len(inputs)} inputs")
        axis = normalize_axes(self, [self.attrs.axis], dy.rank)[0]
        sizes = [x.shape[axis] for x in xs]
        if sum(sizes) != dy.shape[axis]:
            raise self.error(f"inputs of sizes {sizes} along axis {axis} do not make dy {list(dy.shape)}")
        self.parts = axis_parts(dy.rank, axis, sizes)
        return [TensorSpec(x.shape, dy.dtype) for x in xs]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for out, part in zip(outputs, self.parts):
            np.copyto(out, inputs[0][part])


@register("SplitGrad", DataType.FLOAT32)
class SplitGradKernel(Kernel):
    """inputs: x (the forward input), dy0, dy1, ... (omitted ones are zero) -> dx: the dys joined along `axis`.

    An omitted part's size is found from the others: it is the remainder when only one is omitted, else the
    parts must be Split's default equal parts."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, dys = inputs[0], inputs[1:]
        axis = normalize_axes(self, [self.attrs.axis], x.rank)[0]
        if all(d is None for d in dys):
            raise self.error("every output gradient is omitted")
        sizes = self._sizes([None if d is None else d.shape[axis] for d in dys], x.shape[axis])
        for k, (d, size) in enumerate(zip(dys, sizes)):
            if d is not None and d.shape != x.shape[:axis] + (size,) + x.shape[axis + 1:]:
                raise self.error(f"dy{k} {list(d.shape)} does not fit part {k} of x {list(x.shape)}")
        self.parts = axis_parts(x.rank, axis, sizes)
        return [TensorSpec(x.shape, next(d.dtype for d in dys if d is not None))]

    def _sizes(self, known: list[int | None], dim: int) -> list[int]:
        """Every part's size along the axis, given those of the parts present (None for omitted ones)."""
        equal = equal_parts(dim, len(known))
        rest = dim - sum(s for s in known if s is not None)
        if all(s is None or s == e for s, e in zip(known, equal)):
            sizes = equal
        else:
            sizes = [rest if s is None else s for s in known] if known.count(None) == 1 else known
        if None in sizes or sum(sizes) != dim or min(sizes) < 0:
            raise self.error(f"cannot place parts of sizes {known} along a dim of {dim}", NotSupportedError)
        return sizes

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        for dy, part in zip(inputs[1:], self.parts):
            if dy is None:
                outputs[0][part] = 0
            else:
                outputs[0][part] = dy


@register("SliceGrad", DataType.FLOAT32)
class SliceGradKernel(SliceKernel):
    """inputs: dy, x, starts, ends, axes?, steps? (the forward's inputs after dy) -> dx: zeros, with dy written
    back where Slice read it."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        sliced = super().infer(inputs[1:])[0]       # sets self.index
        if sliced.shape != dy.shape:
            raise self.error(f"dy {list(dy.shape)} is not the shape {list(sliced.shape)} Slice produces")
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        outputs[0].fill(0)
        outputs[0][self.index] = inputs[0]


@register("PadGrad", DataType.FLOAT32)
class PadGradKernel(Kernel):
    """inputs: dy, x, pads ([begin..., end...], compile-time known) -> dx: the part of dy that came from x
    (constant padding); elements of x a negative pad cropped get 0."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x = inputs[0], inputs[1]
        pads = [int(p) for p in self.known(inputs[2] if len(inputs) > 2 else None, "pads").ravel()]
        if len(pads) != 2 * x.rank:
            raise self.error(f"pads has {len(pads)} values, a rank-{x.rank} input needs {2 * x.rank}")
        begins, ends = pads[:x.rank], pads[x.rank:]
        if dy.shape != tuple(n + b + e for n, b, e in zip(x.shape, begins, ends)):
            raise self.error(f"dy {list(dy.shape)} is not x {list(x.shape)} padded by {pads}")
        self.src, self.dst = crop_and_place(x.shape, begins, ends)
        self.cropped = min(pads, default=0) < 0
        return [TensorSpec(x.shape, dy.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.cropped:
            outputs[0].fill(0)
        outputs[0][self.src] = inputs[0][self.dst]


@register("ReduceGrad", DataType.FLOAT32)
class ReduceGradKernel(ReduceKernel):
    """inputs: dy (Reduce's output shape), x, y (the forward input and output), axes? -> dx (x's shape).

    SUM spreads dy over the reduced axes, MEAN spreads dy / count, MAX and MIN give dy to the positions holding
    the extreme, split equally between ties (as PyTorch's amax / amin). The axes rule is the forward's."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, y = inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None
        axes = self._axes(x, inputs[3] if len(inputs) > 3 else None) or ()
        self.axes, self.kept = axes, tuple(1 if a in axes else d for a, d in enumerate(x.shape))
        forward_shape = self.kept if self.attrs.keep_dims or not axes else tuple(
            d for a, d in enumerate(x.shape) if a not in axes)
        if dy.shape != forward_shape:
            raise self.error(f"dy {list(dy.shape)} is not the shape {list(forward_shape)} Reduce produces")
        mode = self.attrs.mode
        if mode not in (M.SUM, M.MEAN, M.MAX, M.MIN):
            raise self.error(f"no gradient for reduce mode {mode}", NotSupportedError)
        if mode in (M.MAX, M.MIN) and (y is None or y.shape != dy.shape):
            raise self.error("MAX and MIN need the forward output y of dy's shape as input 2")
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        self.scale = 1.0 / count if mode == M.MEAN and count else 1.0
        self.extreme = mode in (M.MAX, M.MIN)
        return [TensorSpec(x.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(self.kept, np.dtype(np.float32))] if self.extreme else []

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        dy, x, dx = inputs[0].reshape(self.kept), inputs[1], outputs[0]
        if not self.extreme:
            np.multiply(dy, self.scale, out=dx)
            return
        share = self.work[0]
        np.equal(x, inputs[2].reshape(self.kept), out=dx)          # 1 where x holds the extreme
        np.add.reduce(dx, axis=self.axes, keepdims=True, out=share)
        np.divide(dy, share, out=share)
        dx *= share
