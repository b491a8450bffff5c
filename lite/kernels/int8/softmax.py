"""int8 Softmax, as TFLite's int8 kernel computes it: along the axis each input's distance to the row maximum,
d = q - max(q) in [-255, 0], indexes a 256-entry table of exp(s_x * d) (float32, built at compile time; no
exp at run time); the row's sum of table values normalises, and y = clamp(rint(e / sum / s_y) + zp_y). The
result is within one output quantum of TFLite's (which uses 1/256 and -128 as the output's params; any are
accepted here)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.int8.common import input_quant, output_quant
from lite.status import InvalidOpAttrError

SPAN = 256          # distances to the row maximum an int8 row can hold: 0 .. 255


def exp_table(scale: float) -> np.ndarray:
    """[SPAN] float32: exp(scale * d) for d = -255 .. 0 (index d + 255)."""
    return np.exp(np.arange(-(SPAN - 1), 1, dtype=np.float64) * scale).astype(np.float32)


@register("Softmax", DataType.INT8, quantized=True)
class SoftmaxInt8Kernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        self.axis = self.attrs.axis % x.rank
        qx, self.qy = input_quant(self, x), output_quant(self, x.dtype)
        self.table = exp_table(qx.scale)
        self.out_scale = np.float32(1.0 / self.qy.scale)
        return [TensorSpec(x.shape, x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x = inputs[0].astype(np.int16)
        index = x - x.max(axis=self.axis, keepdims=True)
        index += SPAN - 1
        e = self.table[index]
        e *= self.out_scale / e.sum(axis=self.axis, keepdims=True)
        np.rint(e, out=e)
        e += self.qy.zero_point
        np.clip(e, self.qy.lo, self.qy.hi, out=e)
        outputs[0][...] = e
