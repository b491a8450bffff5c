"""Cast: convert x to the dtype of TypeId `to`, elementwise, with C semantics (floats truncate toward zero
when cast to integers; anything non-zero is true). Any input dtype."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite import dtypes
from lite.kernel import Kernel, TensorSpec, register
from lite.status import LiteError, NotSupportedError
from lite.traits import ELEMENTWISE, SAME_DTYPE, Layout, declare


def numpy_dtype(kernel: Kernel, type_id: int) -> np.dtype:
    """The numpy dtype of a TypeId attribute; an unknown id is the kernel's NotSupportedError."""
    try:
        return dtypes.to_numpy(type_id)
    except LiteError:
        raise kernel.error(f"data type id {type_id} is not supported", NotSupportedError) from None


declare("Cast", layout=Layout(ELEMENTWISE), noop=SAME_DTYPE)


@register("Cast")
class CastKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        return [TensorSpec(x.shape, numpy_dtype(self, self.attrs.to))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], inputs[0], casting="unsafe")
