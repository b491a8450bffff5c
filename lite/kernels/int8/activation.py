"""int8 Activation: RELU / RELU6 / HARD_TANH are clamps in the quantized domain when input and output share
their params; every other case (sigmoid, tanh, hswish, hsigmoid, swish, leaky relu, elu, ... or rescaling
clamps) is a 256-entry lookup table built at compile time from the float function:
table[q] = clamp(rint(f((q - zp_x) * s_x) / s_y) + zp_y). A run looks up two values at once: the tensor's bytes
read as uint16 index a 65536-entry table of output pairs (half the gathers, which dominate the cost)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.activation import activation_fn
from lite.kernels.int8.common import Quant, input_quant, output_quant
from lite.kernels.int8.requantize import same_params
from lite.status import LiteError, NotSupportedError
from schema import fb

A = fb.ActivationType
CLAMPS = (A.RELU, A.RELU6, A.HARD_TANH)


def clamp_bounds(kind: int, min_val: float, max_val: float) -> tuple[float, float]:
    """The real interval a clamp activation keeps."""
    return {A.RELU: (0.0, np.inf), A.RELU6: (0.0, 6.0)}.get(kind, (min_val, max_val))


def lookup_table(fn, qx: Quant, qy: Quant) -> np.ndarray:
    """[256] int8 outputs indexed by the input's bytes (its uint8 view)."""
    q = np.arange(256, dtype=np.uint8).view(np.int8).astype(np.float32)
    real = (q - qx.zero_point) * np.float32(qx.scale)
    y = np.empty_like(real)
    fn(real, y)
    return np.clip(np.rint(y.astype(np.float64) / qy.scale) + qy.zero_point, qy.lo, qy.hi).astype(np.int8)


def pair_table(table: np.ndarray) -> np.ndarray:
    """[65536] uint16: `table` applied to both bytes of a uint16 (either byte order: index and result agree)."""
    single, index = table.view(np.uint8).astype(np.uint16), np.arange(1 << 16)
    return single[index & 255] | single[index >> 8] << 8


@register("Activation", DataType.INT8, quantized=True)
class ActivationInt8Kernel(Kernel):
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, a = inputs[0], self.attrs
        qx, qy = input_quant(self, x), output_quant(self, x.dtype)
        if a.type in CLAMPS and same_params(x.quant, self.out_quant[0]):
            lo, hi = clamp_bounds(a.type, a.min_val, a.max_val)
            self.bounds = (max(qy.lo, qy.quantize(lo)) if np.isfinite(lo) else qy.lo,
                           min(qy.hi, qy.quantize(hi)) if np.isfinite(hi) else qy.hi)
            self.table = None
        else:
            try:
                fn = activation_fn(a.type, a.alpha, a.beta, a.min_val, a.max_val)
            except LiteError as e:
                raise self.error(str(e), NotSupportedError) from None
            if fn is None:
                raise self.error("activation type NO_ACTIVATION is not an op", NotSupportedError)
            self.table = lookup_table(fn, qx, qy)
            self.pairs = pair_table(self.table)
        return [TensorSpec(x.shape, x.dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        if self.table is not None:
            x, y = inputs[0].reshape(-1), outputs[0].reshape(-1)
            even = len(x) & ~1
            self.lookups = [(self.pairs, x[:even].view(np.uint16), y[:even].view(np.uint16)),
                            (self.table, x[even:].view(np.uint8), y[even:])]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.table is None:
            np.clip(inputs[0], *self.bounds, out=outputs[0])
            return
        for table, index, out in self.lookups:     # indices are copied to intp first: in place is safe
            np.take(table, index, out=out, mode="clip")
