"""Folding an inference BatchNorm into the weights and bias of the Conv2D/FullConnection before it.

Used by the converter's `fuse_batchnorm` pass and by a training session's inference export.
"""
from __future__ import annotations

import numpy as np


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
