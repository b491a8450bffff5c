"""Dynamic quantization of LSTM (a node of quant type DYNAMIC): W and R int8 with a scale per direction and gate
column (inputs 8-11: W_scale, W_zero_point, R_scale, R_zero_point, zero points 0), X and each step's h_{t-1}
quantized to uint8 at run time. The numpy kernel is the float LSTM kernel's DynamicQuantizeLSTM path (its
rule: one range for X over its steps, one for each step's h over the batch, as onnxruntime quantizes); the
compiled sibling runs the same arithmetic in integers."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.lstm import LSTMKernel
from lite.status import NotSupportedError

SCALES = range(8, 12)      # W_scale, W_zero_point, R_scale, R_zero_point


@register("LSTM", DataType.FLOAT32, quantized=True)
class DynamicLSTMKernel(LSTMKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        w, r = inputs[1], inputs[2]
        if (len(inputs) < 12 or any(inputs[k] is None or inputs[k].value is None for k in SCALES)
                or w.dtype != np.int8 or r.dtype != np.int8 or w.value is None or r.value is None):
            raise self.error("dynamic quantization needs constant int8 W and R with their scales and zero points "
                             "(inputs 8-11)", NotSupportedError)
        if np.any(inputs[9].value) or np.any(inputs[11].value):
            raise self.error("the weights' zero points must be 0 (symmetric int8)", NotSupportedError)
        return super().infer(inputs)
