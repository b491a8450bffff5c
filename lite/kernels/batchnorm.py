"""BatchNorm along the channel axis `axis`: y = (x - mean) / sqrt(var + eps) * scale + bias.

Inference (inputs x, scale, bias, mean, var -> y): with constant statistics the affine form y = x * k + c is
computed once at bind; statistics fed at run time (as in the ONNX node tests) are folded per run, O(channels).

Training (`training = true`, outputs y, saved_mean, saved_invstd): normalise with the batch statistics over every
axis but `axis` (biased variance), and update the mean/var inputs in place as ONNX and PyTorch do:
running = momentum * running + (1 - momentum) * batch, with the unbiased batch variance. saved_invstd is
1 / sqrt(biased var + eps), what BatchNormGrad reads. Never folded: it writes its statistics inputs.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import as_channels, channel_dots, channel_sums
from lite.model import NodeDef
from lite.status import InvalidOpAttrError, NotSupportedError
from lite.traits import AXIS, Layout, TrainMode, declare


def batchnorm_affine(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float,
                     shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(k, c) with y = x * k + c, each reshaped to `shape` to broadcast along the channel axis; in float32 steps
    as onnxruntime folds them (k = 1 / sqrt(var + eps) * scale, c = bias - mean * k), so that a BatchNorm between
    a DequantizeLinear and a QuantizeLinear rounds to the same integers."""
    f32 = np.float32
    k = (f32(1) / np.sqrt(var.astype(f32) + f32(epsilon))) * scale.astype(f32)
    c = bias.astype(f32) - mean.astype(f32) * k
    return k.reshape(shape), c.reshape(shape)


def batch_statistics(x3d: np.ndarray, centred: np.ndarray, mean: np.ndarray, var: np.ndarray) -> None:
    """Mean and biased variance of x [A, C, B] per channel; `centred` (x's shape, may be x) gets x - mean."""
    count = x3d.size // x3d.shape[1]
    channel_sums(x3d, mean)
    mean /= count
    np.subtract(x3d, mean[:, None], out=centred)
    channel_dots(centred, centred, var)
    var /= count


def update_running(running: np.ndarray, batch: np.ndarray, momentum: float) -> None:
    """running = momentum * running + (1 - momentum) * batch, in place."""
    running *= momentum
    running += (1.0 - momentum) * batch


declare("BatchNorm", layout=Layout(AXIS, axis_default=1),
        train=TrainMode(outputs=("saved_mean", "saved_invstd"), flag=True, unless_frozen=(1, 2),
                        state_inputs=((3, "running_mean"), (4, "running_var"))))


@register("BatchNorm", DataType.FLOAT32)
class BatchNormKernel(Kernel):
    float16_compute = True
    inplace = True

    def __init__(self, node: NodeDef):
        super().__init__(node)
        self.training = bool(self.attrs.training)
        self.foldable = not self.training

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, params = inputs[0], inputs[1:5]
        if len(params) != 4 or any(p is None for p in params):
            raise self.error("needs inputs x, scale, bias, mean and variance")
        if x.rank < 2:
            raise self.error(f"needs an input of rank >= 2, got {list(x.shape)}")
        if not -x.rank <= self.attrs.axis < x.rank:
            raise self.error(f"axis {self.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
        self.axis = self.attrs.axis % x.rank
        channels = x.shape[self.axis]
        if any(p.shape != (channels,) for p in params):
            raise self.error(f"scale, bias, mean and variance must have shape [{channels}], got "
                             f"{[list(p.shape) for p in params]}")
        self.param_shape = (channels,) + (1,) * (x.rank - 1 - self.axis)
        self.const_params = all(p.value is not None for p in params)
        if not self.training:
            return [TensorSpec(x.shape, x.dtype)]
        if int(np.prod(x.shape)) < 2 * channels:
            raise self.error(f"training needs more than one value per channel, got input {list(x.shape)}")
        stat = TensorSpec((channels,), np.dtype(np.float32))
        return [TensorSpec(x.shape, x.dtype), stat, stat]

    def bind(self, inputs, outputs, scratch) -> None:
        self.params = inputs[1:5]
        if self.training and not all(p.flags.writeable for p in self.params[2:]):
            raise self.error("training updates the running mean and variance in place: they must be writable "
                             "variables", NotSupportedError)
        if self.const_params and not self.training:
            self.affine = batchnorm_affine(*self.params, self.attrs.epsilon, self.param_shape)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        if self.training:
            self._train(inputs, outputs)
            return
        k, c = self.affine if self.const_params else \
            batchnorm_affine(*self.params, self.attrs.epsilon, self.param_shape)
        out = outputs[0]
        np.multiply(inputs[0], k, out=out)
        out += c

    def _train(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        x, scale, bias, running_mean, running_var = inputs[:5]
        y, mean, invstd = outputs
        y3d = as_channels(y, self.axis)
        batch_statistics(as_channels(x, self.axis), y3d, mean, invstd)        # invstd holds the variance
        count = x.size // x.shape[self.axis]
        update_running(running_mean, mean, self.attrs.momentum)
        update_running(running_var, invstd * (count / (count - 1)), self.attrs.momentum)
        invstd += self.attrs.epsilon
        np.sqrt(invstd, out=invstd)
        np.reciprocal(invstd, out=invstd)
        y3d *= (scale * invstd)[:, None]
        y3d += bias[:, None]
