"""Reshape, Flatten, Squeeze and Unsqueeze: the same elements in the same order under a new shape.

These ops only change metadata, so they are computed in place: when the memory planner gives the output the
input's buffer, `run` does nothing; otherwise it copies once. Parameter inputs (Reshape's shape, the axes of
Squeeze / Unsqueeze) are read at compile time, or at run time when they are run-time values. Any dtype.
"""
from __future__ import annotations

import math
from abc import abstractmethod
from typing import Iterable, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from lite.traits import SAME_SHAPE, declare


def normalize_axes(kernel: Kernel, axes: Iterable[int], rank: int, what: str = "axis") -> list[int]:
    """`axes` mapped into [0, rank) (negative ones count from the end); duplicates and out-of-range axes raise
    the kernel's InvalidOpAttrError."""
    out = []
    for a in (int(a) for a in axes):
        if not -rank <= a < rank:
            raise kernel.error(f"{what} {a} is out of range for rank {rank}", InvalidOpAttrError)
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise kernel.error(f"{what} {out} has duplicates", InvalidOpAttrError)
    return out


class NewShapeKernel(Kernel):
    """Base of the shape-only ops: subclasses give the output shape, this class does the rest."""
    native_dtypes = True
    inplace = True

    @abstractmethod
    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        """The output shape for input `x` (same element count)."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        shape = self.new_shape(x, inputs)
        if math.prod(shape) != math.prod(x.shape):
            raise self.error(f"cannot reshape {list(x.shape)} to {list(shape)}: element counts differ")
        return [TensorSpec(shape, x.dtype, None if x.value is None else x.value.reshape(shape))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.copy = not np.shares_memory(inputs[0], outputs[0])

    def idle(self) -> bool:
        return not self.copy

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.copy:
            np.copyto(outputs[0], inputs[0].reshape(outputs[0].shape))

    def direct(self, inputs, outputs):
        source = inputs[0].reshape(outputs[0].shape)
        return (np.copyto, outputs[0], source) if np.shares_memory(source, inputs[0]) else None


declare("Reshape", "Flatten", "Squeeze", "Unsqueeze", noop=SAME_SHAPE, same_quant=True)


@register("Reshape")
class ReshapeKernel(NewShapeKernel):
    """inputs: x, shape (1-D ints; 0 copies the input dim unless `allowzero`, one -1 is inferred)."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        target = self.known(inputs[1] if len(inputs) > 1 else None, "shape")
        if target.ndim != 1:
            raise self.error(f"shape must be 1-D, got rank {target.ndim}")
        dims = [int(d) for d in target]
        if not self.attrs.allowzero:
            if any(d == 0 and i >= x.rank for i, d in enumerate(dims)):
                raise self.error(f"shape {dims} copies a dim (0) beyond the input rank {x.rank}")
            dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
        if any(d < -1 for d in dims) or dims.count(-1) > 1:
            raise self.error(f"shape {dims} may hold only one -1 and no other negative dim")
        if -1 in dims:
            rest = math.prod(d for d in dims if d != -1)
            if rest == 0 or math.prod(x.shape) % rest:
                raise self.error(f"cannot infer the -1 of shape {dims} for input {list(x.shape)}")
            dims[dims.index(-1)] = math.prod(x.shape) // rest
        return tuple(dims)


@register("Flatten")
class FlattenKernel(NewShapeKernel):
    """[d0..dn) -> [prod(d0..d_axis), prod(d_axis..dn)]; axis in [-rank, rank]."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        axis = int(self.attrs.axis)
        if not -x.rank <= axis <= x.rank:
            raise self.error(f"axis {axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        axis = axis + x.rank if axis < 0 else axis
        return math.prod(x.shape[:axis]), math.prod(x.shape[axis:])


@register("Squeeze")
class SqueezeKernel(NewShapeKernel):
    """inputs: x, axes? (1-D ints); without axes every size-1 dim is removed."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        if len(inputs) > 1 and inputs[1] is not None:
            axes = normalize_axes(self, self.known(inputs[1], "axes").ravel(), x.rank, "axes")
            wrong = [a for a in axes if x.shape[a] != 1]
            if wrong:
                raise self.error(f"cannot squeeze axes {wrong} of shape {list(x.shape)}: their size is not 1")
        else:
            axes = [a for a, d in enumerate(x.shape) if d == 1]
        return tuple(d for a, d in enumerate(x.shape) if a not in axes)


@register("Unsqueeze")
class UnsqueezeKernel(NewShapeKernel):
    """inputs: x, axes (1-D ints, positions in the output); inserts size-1 dims."""

    def new_shape(self, x: TensorSpec, inputs: Sequence[TensorSpec | None]) -> tuple[int, ...]:
        values = self.known(inputs[1] if len(inputs) > 1 else None, "axes").ravel()
        axes = normalize_axes(self, values, x.rank + len(values), "axes")
        dims = iter(x.shape)
        return tuple(1 if a in axes else next(dims) for a in range(x.rank + len(axes)))
