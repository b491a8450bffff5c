"""The compiled siblings of Activation and PReLU on float32: GELU (exact and tanh-approximated) in one threaded pass
(`gelu.gelu`, `gelu.gelu_tanh`); clamps (RELU, RELU6) and a per-channel PReLU as the conv epilogue's threaded
in-place passes (`epilogue`), after a copy when the planner gave the output memory of its own. numpy's clip and
PReLU took 0.03-0.09 ms on maps of 37-74k floats that MediaPipe's detectors resize after a conv
(`conv_before_resize`), 0.01 ms here. The other activations keep the numpy kernel."""
from __future__ import annotations

import functools
from typing import Callable, Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import TensorSpec, register
from lite.kernels.activation import ActivationKernel, PReLUKernel, clamp_bounds
from lite.kernels.compiled import CompiledCall
from lite.kernels.compiled import epilogue as epilogues
from schema import fb

KERNELS = {fb.ActivationType.GELU: "gelu", fb.ActivationType.GELU_TANH: "gelu_tanh"}    # in `gelu`
CLAMPS = (fb.ActivationType.RELU, fb.ActivationType.RELU6)


def in_place(x: np.ndarray, out: np.ndarray, apply: Callable[[], None]) -> Callable[[], None]:
    """`apply` (a pass over `out` in place) on x: directly where out is x's memory, else after copying x."""
    return apply if np.shares_memory(x, out) else functools.partial(_copy_then, x, out, apply)


def _copy_then(x: np.ndarray, out: np.ndarray, apply: Callable[[], None]) -> None:
    np.copyto(out, x)
    apply()


@register("Activation", DataType.FLOAT32, backend="compiled")
class ActivationCompiled(CompiledCall, ActivationKernel):
    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        self.compiled = self.attrs.type in KERNELS or self.attrs.type in CLAMPS

    def inplace_input(self) -> int | None:
        """GELU never in place when compiled: LLVM vectorises the pass only for distinct arrays (in place ran 12x
        slower). A clamp is one array's pass, best in place."""
        return None if self.attrs.type in KERNELS else super().inplace_input()

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        x, out = inputs[0], outputs[0]
        if self.attrs.type in CLAMPS and out.ndim and out.flags.c_contiguous and out.size:
            return in_place(x, out, epilogues.epilogue(out, None, self.attrs.type))
        if self.attrs.type in CLAMPS:
            return functools.partial(self.fn, x, out)
        from lite.kernels.compiled import gelu
        return getattr(gelu, KERNELS[self.attrs.type]).bind(x.size * 16, x.reshape(-1), out.reshape(-1))


@register("PReLU", DataType.FLOAT32, backend="compiled")
class PReLUCompiled(CompiledCall, PReLUKernel):
    """A constant slope of one value per channel (the last axis: NHWC) or one value in all."""

    def select(self, inputs: Sequence[TensorSpec | None]) -> None:
        x, slope = inputs[0], inputs[1]
        self.compiled = (slope.value is not None and x.rank >= 1 and x.shape[-1] > 0
                         and all(d == 1 for d in slope.shape[:-1]) and slope.value.size in (1, x.shape[-1]))

    def bind_call(self, inputs, outputs, scratch) -> Callable[[], None]:
        x, out = inputs[0], outputs[0]
        slope = np.broadcast_to(np.asarray(inputs[1], np.float32).reshape(-1), (out.shape[-1],))
        return in_place(x, out, epilogues.prelu(out, slope))
