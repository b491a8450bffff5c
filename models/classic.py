"""The pre-BatchNorm classics: LeNet-5 and AlexNet."""

from __future__ import annotations

from itertools import count

import onnx

from .graph import (
    Graph,
    Tensor,
    activation,
    avg_pool,
    conv,
    dropout,
    flatten,
    linear,
    local_response_norm,
    max_pool,
)


def lenet5(
    num_classes: int = 10, input_size: int = 32, in_channels: int = 1, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """LeNet-5 (LeCun et al., 1998) with ReLU: conv5x5(6) -> pool -> conv5x5(16) -> pool -> FC120 -> FC84 -> FC.

    Pooling is the paper's 2x2 average subsampling. Inputs below 32x32 (e.g. 28x28 MNIST) get the padding on the
    first convolution that restores the paper's 32x32 geometry.
    """
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    y = conv(g, x, 6, 5, padding=max(0, (32 - input_size) // 2), bias=True, name="conv1")
    y = avg_pool(g, activation(g, y, "relu", "relu1"), 2, 2, name="pool1")
    y = conv(g, y, 16, 5, padding=0, bias=True, name="conv2")
    y = avg_pool(g, activation(g, y, "relu", "relu2"), 2, 2, name="pool2")
    y = flatten(g, y)
    y = activation(g, linear(g, y, 120, "fc1"), "relu", "relu3")
    y = activation(g, linear(g, y, 84, "fc2"), "relu", "relu4")
    return g.model(x, linear(g, y, num_classes, "fc3"), "lenet5")


def _largest_divisor_up_to(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def _alexnet_features(g: Graph, x: Tensor) -> Tensor:
    """Five conv layers of the paper (96-256-384-384-256; conv2/4/5 split in two groups as on the two GPUs),
    LRN + max-pool after the first two, max-pool after the last when the map is still at least 3x3."""
    index = count()

    def conv_relu(y: Tensor, channels: int, kernel: int, stride: int, padding: int, groups: int) -> Tensor:
        y = conv(g, y, channels, kernel, stride, padding, groups, bias=True, name=str(next(index)))
        return activation(g, y, "relu", str(next(index)))

    def lrn_pool(y: Tensor) -> Tensor:
        y = local_response_norm(g, y, size=5, alpha=1e-4, beta=0.75, k=2.0, name=str(next(index)))
        return max_pool(g, y, 3, 2, name=str(next(index)))

    with g.scope("features"):
        y = lrn_pool(conv_relu(x, 96, 11, 4, 2, 1))
        y = lrn_pool(conv_relu(y, 256, 5, 1, 2, 2))
        y = conv_relu(y, 384, 3, 1, 1, 1)
        y = conv_relu(y, 384, 3, 1, 1, 2)
        y = conv_relu(y, 256, 3, 1, 1, 2)
        return max_pool(g, y, 3, 2, name=str(next(index))) if int(y.shape[2]) >= 3 else y


def alexnet(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """AlexNet (Krizhevsky et al., 2012): the paper's features (see ``_alexnet_features``), then the adaptive
    average pool of torchvision reduced to an exactly-dividing size (6x6 at 224, 1x1 at 32 or 64), and the
    classifier Dropout -> FC4096 -> ReLU -> Dropout -> FC4096 -> ReLU -> FC."""
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    y = _alexnet_features(g, x)
    size = int(y.shape[2])
    pooled = _largest_divisor_up_to(size, 6)
    if pooled != size:
        y = avg_pool(g, y, size // pooled, size // pooled)
    y = flatten(g, y)
    with g.scope("classifier"):
        y = linear(g, dropout(g, y, 0.5, "0"), 4096, "1")
        y = activation(g, y, "relu", "2")
        y = linear(g, dropout(g, y, 0.5, "3"), 4096, "4")
        y = activation(g, y, "relu", "5")
        y = linear(g, y, num_classes, "6")
    return g.model(x, y, "alexnet")
