"""FloatClass: y (bool) = isnan(x) (ONNX IsNaN) or isinf(x) for the signs the attributes select (ONNX IsInf)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.unary import FLOAT_TYPES
from lite.status import NotSupportedError
from lite.traits import ELEMENTWISE, Layout, declare
from schema import fb

F = fb.FloatClassMode


declare("FloatClass", layout=Layout(ELEMENTWISE))


@register("FloatClass", *FLOAT_TYPES)
class FloatClassKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a = self.attrs
        if a.mode == F.NAN:
            self.fn = lambda x, out: np.isnan(x, out=out)
        elif a.mode == F.INF:
            self.fn = {(True, True): lambda x, out: np.isinf(x, out=out),
                       (True, False): lambda x, out: np.isposinf(x, out=out),
                       (False, True): lambda x, out: np.isneginf(x, out=out),
                       (False, False): lambda x, out: out.fill(False)}[bool(a.detect_positive),
                                                                        bool(a.detect_negative)]
        else:
            raise self.error(f"float class mode {a.mode} is not one of NAN (0), INF (1)", NotSupportedError)
        return [TensorSpec(inputs[0].shape, np.dtype(np.bool_))]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.fn(inputs[0], outputs[0])
