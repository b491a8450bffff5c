"""EfficientNet-B0 (Tan & Le, 2019) following torchvision's definition."""

from __future__ import annotations

import onnx

from .graph import (
    Graph,
    SqueezeExcite,
    conv_bn_act,
    dropout,
    flatten,
    global_avg_pool,
    inverted_residual,
    linear,
)

# B0 stage table: (expand ratio, kernel, first stride, output channels, layers); the stem has 32 channels.
_B0_STAGES = ((1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
              (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1))  # fmt: skip


def efficientnet_b0(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """EfficientNet-B0: swish (SiLU) MBConv blocks with squeeze-excitation (squeeze = block input channels / 4,
    sigmoid gate), 1280-channel head, classifier Dropout(0.2) -> FC."""
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    with g.scope("features"):
        with g.scope(0):
            y = conv_bn_act(g, x, 32, 3, 2, act="silu")
        for stage, (expand, kernel, stride, channels, layers) in enumerate(_B0_STAGES, 1):
            with g.scope(stage):
                for i in range(layers):
                    se = SqueezeExcite(max(1, y.channels // 4), "silu", "sigmoid")
                    with g.scope(i):
                        y = inverted_residual(
                            g, y, expand * y.channels, channels, kernel, stride if i == 0 else 1, "silu", se
                        )
        with g.scope(len(_B0_STAGES) + 1):
            y = conv_bn_act(g, y, 4 * y.channels, 1, act="silu")
    y = flatten(g, global_avg_pool(g, y))
    with g.scope("classifier"):
        y = linear(g, dropout(g, y, 0.2, "0"), num_classes, "1")
    return g.model(x, y, "efficientnet_b0")
