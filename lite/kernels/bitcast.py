"""BitCast: the bytes of x reinterpreted as another type of the same width (ONNX BitCast); the shape is kept.
Little-endian, as every tensor of the runtime is."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite import dtypes
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, LiteError
from lite.traits import ELEMENTWISE, Layout, declare


declare("BitCast", layout=Layout(ELEMENTWISE))


@register("BitCast")
class BitCastKernel(Kernel):
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        try:
            to = dtypes.to_numpy(self.attrs.to)
        except LiteError as e:
            raise self.error(f"'to' {self.attrs.to}: {e}", InvalidOpAttrError) from None
        if to.itemsize != x.dtype.itemsize:
            raise self.error(f"cannot reinterpret {x.dtype} as {to}: the widths differ", InvalidOpAttrError)
        return [TensorSpec(x.shape, to)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0].view(inputs[0].dtype), inputs[0])
