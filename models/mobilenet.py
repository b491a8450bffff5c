"""MobileNet V1 (Howard et al., 2017), V2 (Sandler et al., 2018) and V3 small/large (Howard et al., 2019),
V2/V3 following torchvision's definitions and configuration tables."""

from __future__ import annotations

from typing import NamedTuple

import onnx

from .graph import (
    Graph,
    SqueezeExcite,
    activation,
    conv_bn_act,
    dropout,
    flatten,
    global_avg_pool,
    inverted_residual,
    linear,
    make_divisible,
)

# (output channels, stride) of the depthwise-separable layers of MobileNetV1.
_V1_LAYERS = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), *((512, 1),) * 5, (1024, 2), (1024, 1))

# (expand ratio t, output channels c, repeats n, first stride s) of MobileNetV2.
_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))


class _V3Block(NamedTuple):
    kernel: int
    expanded: int
    out: int
    se: bool
    act: str
    stride: int


def _v3(*rows: tuple[int, int, int, bool, str, int]) -> tuple[_V3Block, ...]:
    return tuple(_V3Block(k, e, o, se, {"RE": "relu", "HS": "hardswish"}[a], s) for k, e, o, se, a, s in rows)


# torchvision's bneck_conf tables (kernel, expanded, out, SE, activation, stride); stem has 16 channels.
_V3_LARGE = _v3(
    (3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
    (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
    (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
    (3, 184, 80, False, "HS", 1), (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
    (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1), (5, 960, 160, True, "HS", 1),
)  # fmt: skip
_V3_SMALL = _v3(
    (3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
    (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
    (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
    (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1),
)  # fmt: skip

# MobileNetV3 BatchNorm: eps 1e-3, PyTorch momentum 0.01.
_V3_BN = {"bn_eps": 1e-3, "bn_momentum": 0.01}


def mobilenet_v1(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV1 (width 1.0): 3x3 stem, 13 depthwise-separable layers (dw 3x3 + pw 1x1, BN + ReLU), pool, FC."""
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    with g.scope("features"):
        with g.scope(0):
            y = conv_bn_act(g, x, 32, 3, 2)
        for i, (channels, stride) in enumerate(_V1_LAYERS, 1):
            with g.scope(i):
                with g.scope("dw"):
                    y = conv_bn_act(g, y, y.channels, 3, stride, groups=y.channels)
                with g.scope("pw"):
                    y = conv_bn_act(g, y, channels, 1)
    y = flatten(g, global_avg_pool(g, y))
    return g.model(x, linear(g, y, num_classes, "classifier"), "mobilenet_v1")


def mobilenet_v2(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV2 (width 1.0): inverted residuals with ReLU6 and linear bottlenecks, 1280-channel head,
    classifier Dropout(0.2) -> FC."""
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    with g.scope("features"):
        with g.scope(0):
            y = conv_bn_act(g, x, 32, 3, 2, act="relu6")
        index = 1
        for t, c, n, s in _V2_STAGES:
            for i in range(n):
                with g.scope(index):
                    y = inverted_residual(g, y, t * y.channels, c, 3, s if i == 0 else 1, "relu6", body="conv")
                index += 1
        with g.scope(index):
            y = conv_bn_act(g, y, 1280, 1, act="relu6")
    y = flatten(g, global_avg_pool(g, y))
    with g.scope("classifier"):
        y = linear(g, dropout(g, y, 0.2, "0"), num_classes, "1")
    return g.model(x, y, "mobilenet_v2")


def _mobilenet_v3(
    name: str, blocks: tuple[_V3Block, ...], last_channel: int, num_classes: int, input_size: int,
    in_channels: int, batch: int | None, seed: int,
) -> onnx.ModelProto:
    g = Graph(seed)
    x = g.input(batch, in_channels, input_size)
    with g.scope("features"):
        with g.scope(0):
            y = conv_bn_act(g, x, 16, 3, 2, act="hardswish", **_V3_BN)
        for i, b in enumerate(blocks, 1):
            se = SqueezeExcite(make_divisible(b.expanded // 4), "relu", "hardsigmoid") if b.se else None
            with g.scope(i):
                y = inverted_residual(g, y, b.expanded, b.out, b.kernel, b.stride, b.act, se, **_V3_BN)
        with g.scope(len(blocks) + 1):
            y = conv_bn_act(g, y, 6 * y.channels, 1, act="hardswish", **_V3_BN)
    y = flatten(g, global_avg_pool(g, y))
    with g.scope("classifier"):
        y = activation(g, linear(g, y, last_channel, "0"), "hardswish", "1")
        y = linear(g, dropout(g, y, 0.2, "2"), num_classes, "3")
    return g.model(x, y, name)


def mobilenet_v3_small(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV3-Small: 11 bneck blocks (SE with hard-sigmoid gates, ReLU/hard-swish), 576 -> 1024 head."""
    return _mobilenet_v3(
        "mobilenet_v3_small", _V3_SMALL, 1024, num_classes, input_size, in_channels, batch, seed
    )


def mobilenet_v3_large(
    num_classes: int = 1000, input_size: int = 224, in_channels: int = 3, batch: int | None = 1, seed: int = 0
) -> onnx.ModelProto:
    """MobileNetV3-Large: 15 bneck blocks (SE with hard-sigmoid gates, ReLU/hard-swish), 960 -> 1280 head."""
    return _mobilenet_v3(
        "mobilenet_v3_large", _V3_LARGE, 1280, num_classes, input_size, in_channels, batch, seed
    )
