"""Dynamic quantization of LSTM and GRU (nodes of quant type DYNAMIC): W and R int8 with a scale per direction and
gate column (after the op's own inputs: W_scale, W_zero_point, R_scale, R_zero_point, zero points 0), X and each
step's h_{t-1} quantized to uint8 at run time with one range each (X over its steps, h over the batch), as
onnxruntime's DynamicQuantizeLSTM does. LSTM's numpy kernel is the float LSTM kernel's DynamicQuantizeLSTM path;
GRU's is below; the compiled siblings run the same arithmetic in integers."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.gru import GRUKernel
from lite.kernels.int8.dynamic_matmul import quantize_rows
from lite.kernels.lstm import LSTMKernel
from lite.status import NotSupportedError

SCALES = range(8, 12)      # LSTM's W_scale, W_zero_point, R_scale, R_zero_point


@register("LSTM", DataType.FLOAT32, quantized=True)
class DynamicLSTMKernel(LSTMKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        check_quantized(self, inputs, SCALES)
        return super().infer(inputs)


def check_quantized(kernel: Kernel, inputs: Sequence[TensorSpec | None], scales: range) -> None:
    """Constant int8 W and R, and their scales and zero points (all 0) as the inputs `scales`."""
    w, r = inputs[1], inputs[2]
    if (len(inputs) < scales.stop or any(inputs[k] is None or inputs[k].value is None for k in scales)
            or w.dtype != np.int8 or r.dtype != np.int8 or w.value is None or r.value is None):
        raise kernel.error(f"dynamic quantization needs constant int8 W and R with their scales and zero points "
                           f"(inputs {scales.start}-{scales.stop - 1})", NotSupportedError)
    if np.any(inputs[scales[1]].value) or np.any(inputs[scales[3]].value):
        raise kernel.error("the weights' zero points must be 0 (symmetric int8)", NotSupportedError)


GRU_SCALES = range(6, 10)  # W_scale, W_zero_point, R_scale, R_zero_point after GRU's six inputs


@register("GRU", DataType.FLOAT32, quantized=True)
class DynamicGRUKernel(GRUKernel):
    """GRU with W and R int8 per direction and gate column (inputs 6-9 as LSTM's 8-11), X (all steps) and each
    step's h (and r * h, when linear_before_reset is 0) quantized to uint8 with one range each, by the rule of
    LSTM's: the integer products scaled by the two scales in float32, then the float GRU step."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        check_quantized(self, inputs, GRU_SCALES)
        return super().infer(inputs[:6])

    def run(self, inputs, outputs) -> None:
        w_scale, _, r_scale, _ = inputs[6:10]
        self.w_levels, self.r_levels = inputs[1].astype(np.float64), inputs[2].astype(np.float64)
        self.w_scale, self.r_scale = (s.astype(np.float32).reshape(self.D, -1) for s in (w_scale, r_scale))
        super().run(inputs[:6], outputs)

    def project(self, x, w, bias) -> None:
        pre = self.gates_buf.reshape(self.T, self.B, self.D, -1)
        levels, scale = levels_of(x)
        products = levels.reshape(-1, self.I) @ self.w_levels.reshape(-1, self.I).T
        np.multiply(products.astype(np.float32).reshape(pre.shape), scale * self.w_scale, out=pre)
        if bias is not None:
            self.gates_buf += bias[None, None]

    def recurrent(self, h: np.ndarray, r: np.ndarray, d: int, rows: slice, out: np.ndarray) -> None:
        """out = h R[rows]^T of direction d, h quantized with its range."""
        levels, scale = levels_of(h)
        np.multiply((levels @ self.r_levels[d, rows].T).astype(np.float32), scale * self.r_scale[d, rows], out=out)


def levels_of(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """x quantized to uint8 with one range (DynamicQuantizeLinear's rule) as levels q - zero point (float64, exact
    in the products) and its scale."""
    q, scale, zero = quantize_rows(x.reshape(1, -1))
    return (q.astype(np.float64) - zero[0]).reshape(x.shape), scale[0]
