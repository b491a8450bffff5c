"""Compare: y (bool) = a == b, a > b, a >= b, a < b or a <= b with numpy broadcasting (ONNX Equal, Greater,
GreaterOrEqual, Less, LessOrEqual). Operands share one numeric dtype; Equal also takes bool operands."""
from __future__ import annotations

import numpy as np

from lite.kernel import TensorSpec, register
from lite.kernels.arithmetic import Binary, BinaryKernel
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare
from schema import fb

C = fb.CompareMode
_UFUNCS = {C.EQUAL: np.equal, C.GREATER: np.greater, C.GREATER_EQUAL: np.greater_equal, C.LESS: np.less,
           C.LESS_EQUAL: np.less_equal}


declare("Compare", layout=Layout(ELEMENTWISE))


@register("Compare")
class CompareKernel(BinaryKernel):
    inplace = False          # the bool output has another element size than most operands
    kinds = "biuf"

    def specialise(self, a: TensorSpec, b: TensorSpec) -> Binary:
        mode = self.attrs.mode
        if mode not in _UFUNCS:
            raise self.error(f"compare mode {mode} is not one of {sorted(_UFUNCS)}", NotSupportedError)
        if a.dtype.kind == "b" and mode != C.EQUAL:
            raise self.error("only equality compares bool operands", NotSupportedError)
        ufunc = _UFUNCS[mode]
        return lambda x, y, out: ufunc(x, y, out=out)

    def result_dtype(self, a: TensorSpec) -> np.dtype:
        return np.dtype(np.bool_)
