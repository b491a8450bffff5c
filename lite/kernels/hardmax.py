"""Hardmax: 1 at the first maximum along `axis`, 0 elsewhere (ONNX Hardmax, opset 13 form; the importer maps
older opsets' 2-D coercion onto it)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.unary import FLOAT_TYPES
from lite.status import InvalidOpAttrError
from lite.traits import AXIS, Layout, declare


declare("Hardmax", layout=Layout(AXIS, axis_default=-1))


@register("Hardmax", *FLOAT_TYPES)
class HardmaxKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, axis = inputs[0], self.attrs.axis
        if not -x.rank <= axis < x.rank:
            raise self.error(f"axis {axis} is out of range for a rank-{x.rank} input", InvalidOpAttrError)
        self.axis = axis % x.rank
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, out = inputs[0], outputs[0]
        out.fill(0)
        if x.size:
            np.put_along_axis(out, np.argmax(x, axis=self.axis, keepdims=True), 1, axis=self.axis)
