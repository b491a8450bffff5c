"""Folding an inference BatchNorm into the weights and bias of the op before it (Conv2D, Conv2DTranspose,
FullConnection: the ops with `traits(op).batchnorm_folds`).

The rule and the arithmetic are shared by the converter's `fuse_batchnorm` pass and a training session's
inference export; each walks its own graph form.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.traits import traits


def fold_axis(producer_op: str, activation: int, weight_shape: Sequence[int], out_shape: Sequence[int],
              bn_axis: int) -> int | None:
    """The weight axis to scale when a BatchNorm along `bn_axis` of the producer's output folds into the
    producer's weight; None when it cannot: the op declares no folding, applies an activation first, the
    BatchNorm is not on the output's channel (last, NHWC) axis, or the weight's channel axis does not hold one
    slice per output channel (grouped transposed convolution)."""
    t = traits(producer_op)
    rank = len(out_shape)
    if not t.batchnorm_folds or activation or rank < 2 or bn_axis % rank != rank - 1 or not weight_shape:
        return None
    axis = t.weight_axis % len(weight_shape)
    return axis if weight_shape[axis] == out_shape[-1] else None


def fold_batchnorm(weight: np.ndarray, bias: np.ndarray | None, gamma: np.ndarray, beta: np.ndarray,
                   mean: np.ndarray, var: np.ndarray, epsilon: float, channel_axis: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(weight', bias') with conv'(x) = gamma * (conv(x) + bias - mean) / sqrt(var + eps) + beta.

    `channel_axis` is the weight's output-channel axis (0 for OHWI and [out, in]); computed in float64."""
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    shape = [1] * weight.ndim
    shape[channel_axis] = -1
    new_weight = (weight.astype(np.float64) * scale.reshape(shape)).astype(weight.dtype)
    b = bias.astype(np.float64) if bias is not None else np.zeros_like(scale)
    new_bias = ((b - mean.astype(np.float64)) * scale + beta.astype(np.float64)).astype(weight.dtype)
    return new_weight, new_bias
