"""EfficientNet-B0 (Tan & Le, 2019) following torchvision's definition, and EfficientNet-Lite0, the variant made
for integer inference (ReLU6, no squeeze-excitation, fixed stem and head), following the published checkpoint."""

from __future__ import annotations

import onnx

from .graph import (
    Graph,
    SqueezeExcite,
    Tensor,
    activation,
    add,
    batch_norm,
    conv,
    conv_bn_act,
    dropout,
    flatten,
    global_avg_pool,
    inverted_residual,
    linear,
    same_padding,
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


# Lite0 keeps B0's stage table; its BatchNorms are TensorFlow's (epsilon 1e-3, momentum 0.99 = PyTorch's 0.01).
_LITE_BN = {"eps": 1e-3, "momentum": 0.01}


def _lite_conv_bn(g: Graph, x: Tensor, channels: int, kernel: int, stride: int, groups: int, conv_name: str,
                  bn_name: str, act: bool = True) -> Tensor:
    """Conv ("SAME" padding, as the TensorFlow original) -> BatchNorm [-> ReLU6], named like the checkpoint."""
    y = conv(g, x, channels, kernel, stride, same_padding(int(x.shape[2]), kernel, stride), groups, name=conv_name)
    y = batch_norm(g, y, bn_name, **_LITE_BN)
    return activation(g, y, "relu6", "relu6") if act else y


def efficientnet_lite0(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """EfficientNet-Lite0: MBConv blocks with ReLU6 and no squeeze-excitation, 32-channel stem, 1280-channel head,
    Dropout(0.2) -> FC. Initializers carry the names of the published PyTorch checkpoint (`_conv_stem.weight`,
    `_blocks.3._expand_conv.weight`, ...), so `models.pretrained.load_weights` can fill in the real weights."""
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    y = _lite_conv_bn(g, x, 32, 3, 2, 1, "_conv_stem", "_bn0")
    with g.scope("_blocks"):
        index = 0
        for expand, kernel, stride, channels, layers in _B0_STAGES:
            for i in range(layers):
                with g.scope(index):
                    block_in, step = y, stride if i == 0 else 1
                    if expand != 1:
                        y = _lite_conv_bn(g, y, expand * y.channels, 1, 1, 1, "_expand_conv", "_bn0")
                    y = _lite_conv_bn(g, y, y.channels, kernel, step, y.channels, "_depthwise_conv", "_bn1")
                    y = _lite_conv_bn(g, y, channels, 1, 1, 1, "_project_conv", "_bn2", act=False)
                    if step == 1 and channels == block_in.channels:
                        y = add(g, y, block_in)
                index += 1
    y = _lite_conv_bn(g, y, 1280, 1, 1, 1, "_conv_head", "_bn1")
    y = flatten(g, global_avg_pool(g, y, "_avg_pooling"))
    y = linear(g, dropout(g, y, 0.2, "_dropout"), num_classes, "_fc")
    return g.model(x, y, "efficientnet_lite0")
