"""ResNet-18 and ResNet-50 (He et al., 2015) in torchvision's layout (stride on the 3x3 conv of bottlenecks)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx

from .graph import (
    Graph,
    Tensor,
    activation,
    add,
    batch_norm,
    conv,
    flatten,
    global_avg_pool,
    linear,
    max_pool,
)

Block = Callable[[Graph, Tensor, int, int], Tensor]


def _shortcut(g: Graph, x: Tensor, channels: int, stride: int) -> Tensor:
    """Identity, or the ``downsample`` 1x1 conv + BN when the shape changes."""
    if stride == 1 and x.channels == channels:
        return x
    with g.scope("downsample"):
        return batch_norm(g, conv(g, x, channels, 1, stride, name="0"), "1")


def _basic_block(g: Graph, x: Tensor, planes: int, stride: int) -> Tensor:
    """3x3 -> 3x3 with identity or downsample shortcut; output ``planes`` channels."""
    y = activation(g, batch_norm(g, conv(g, x, planes, 3, stride, name="conv1"), "bn1"), "relu", "relu")
    y = batch_norm(g, conv(g, y, planes, 3, name="conv2"), "bn2")
    return activation(g, add(g, y, _shortcut(g, x, planes, stride)), "relu", "relu")


def _bottleneck(g: Graph, x: Tensor, planes: int, stride: int) -> Tensor:
    """1x1 -> 3x3 (strided) -> 1x1 expanding to ``4 * planes`` channels, with shortcut."""
    y = activation(g, batch_norm(g, conv(g, x, planes, 1, name="conv1"), "bn1"), "relu", "relu")
    y = activation(g, batch_norm(g, conv(g, y, planes, 3, stride, name="conv2"), "bn2"), "relu", "relu")
    y = batch_norm(g, conv(g, y, 4 * planes, 1, name="conv3"), "bn3")
    return activation(g, add(g, y, _shortcut(g, x, 4 * planes, stride)), "relu", "relu")


def _resnet(
    name: str, block: Block, depths: Sequence[int], num_classes: int, input_size: int, in_channels: int,
    batch: int | None, seed: int,
) -> onnx.ModelProto:
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    y = activation(g, batch_norm(g, conv(g, x, 64, 7, 2, 3, name="conv1"), "bn1"), "relu", "relu")
    y = max_pool(g, y, 3, 2, 1)
    for stage, depth in enumerate(depths):
        with g.scope(f"layer{stage + 1}"):
            for i in range(depth):
                with g.scope(i):
                    y = block(g, y, 64 << stage, 2 if stage > 0 and i == 0 else 1)
    y = flatten(g, global_avg_pool(g, y))
    return g.model(x, linear(g, y, num_classes, "fc"), name)


def resnet18(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """ResNet-18: basic blocks, stages of [2, 2, 2, 2]."""
    return _resnet("resnet18", _basic_block, (2, 2, 2, 2), num_classes, input_size, in_channels, batch, seed)


def resnet50(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """ResNet-50 (v1.5): bottleneck blocks, stages of [3, 4, 6, 3]."""
    return _resnet("resnet50", _bottleneck, (3, 4, 6, 3), num_classes, input_size, in_channels, batch, seed)
