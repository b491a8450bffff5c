"""Concat: join tensors of one dtype along `axis` (the ONNX axis, negative counts from the end). Any dtype."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes
from lite.traits import AXIS, Layout, declare


declare("Concat", layout=Layout(AXIS, all_inputs=True))


@register("Concat")
class ConcatKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        if not inputs or any(x is None for x in inputs):
            raise self.error("every input must be present")
        first = inputs[0]
        axis = normalize_axes(self, [self.attrs.axis], first.rank)[0]
        for k, x in enumerate(inputs):
            if x.dtype != first.dtype:
                raise self.error(f"input {k} is {x.dtype}, input 0 is {first.dtype}")
            if x.rank != first.rank or any(a != b for i, (a, b) in enumerate(zip(x.shape, first.shape))
                                           if i != axis):
                raise self.error(f"input {k} of shape {list(x.shape)} does not match {list(first.shape)} "
                                 f"outside axis {axis}")
        self.axis = axis
        shape = list(first.shape)
        shape[axis] = sum(x.shape[axis] for x in inputs)
        return [TensorSpec(tuple(shape), first.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.concatenate(inputs, axis=self.axis, out=outputs[0])
