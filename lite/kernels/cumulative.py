"""Cumulative: the running sum (ONNX CumSum) or product (ONNX CumProd) along an axis, optionally exclusive
(the current element left out) and reversed (from the end). An axis known only at run time is read at every run.

Reversal and exclusion are views: the accumulation runs once, on flipped and shifted views of x and y."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, NotSupportedError
from schema import fb

_UFUNCS = {fb.CumulativeMode.SUM: np.add, fb.CumulativeMode.PROD: np.multiply}


class AlongAxis(Kernel):
    """The axis input and views along it, shared with CumProdGrad."""

    def read_axis(self, x: TensorSpec, axis_spec: TensorSpec | None) -> None:
        if x.rank == 0:
            raise self.error("the input must have at least one axis")
        axis = self.known(axis_spec, "axis")
        if axis.size != 1 or axis.dtype.kind not in "iu":
            raise self.error(f"axis must be one integer, got {axis.dtype} of shape {axis.shape}", InvalidOpAttrError)
        axis = int(axis.reshape(-1)[0])
        if not -x.rank <= axis < x.rank:
            raise self.error(f"axis {axis} is out of range for a rank-{x.rank} input", InvalidOpAttrError)
        self.axis = axis % x.rank

    def _along(self, a: np.ndarray, part: slice) -> np.ndarray:
        index = [slice(None)] * a.ndim
        index[self.axis] = part
        return a[tuple(index)]


@register("Cumulative")
class CumulativeKernel(AlongAxis):
    """inputs: x (numeric), axis (int32/int64 scalar); output: x's shape and dtype."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if self.attrs.mode not in _UFUNCS:
            raise self.error(f"cumulative mode {self.attrs.mode} is not SUM (0) or PROD (1)", NotSupportedError)
        if x.dtype.kind not in "iuf":
            raise self.error(f"{x.dtype} tensors are not supported", NotSupportedError)
        self.read_axis(x, inputs[1] if len(inputs) > 1 else None)
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, out, ufunc = inputs[0], outputs[0], _UFUNCS[self.attrs.mode]
        if self.attrs.reverse:
            x, out = np.flip(x, self.axis), np.flip(out, self.axis)
        if self.attrs.exclusive:
            self._along(out, slice(0, 1))[...] = ufunc.identity
            x, out = self._along(x, slice(0, -1)), self._along(out, slice(1, None))
        ufunc.accumulate(x, axis=self.axis, dtype=out.dtype, out=out)
