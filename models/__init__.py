"""Model zoo: seeded ONNX (opset 13) builders of classic CNNs, shaped like PyTorch exports.

Every builder is ``builder(num_classes=..., input_size=..., in_channels=..., batch=1, seed=0) -> onnx.ModelProto``
with graph input ``input`` (NCHW float32; ``batch=None`` gives a symbolic "N") and output ``logits``
``[batch, num_classes]``. ``TASKS`` holds the detection and segmentation models of ``models.tasks`` and the
control-flow model of ``models.control_flow``, built in PyTorch and exported with ``torch.onnx.export`` (same
builder keywords; their outputs are described there), and ``SEQUENCE`` the recurrent models of
``models.sequence`` (keyword spotting, text recognition, streaming; their inputs and outputs are described
there). Only these and ``models.pretrained`` (to read a published checkpoint) import torch; the PyTorch
executor the tests and benches compare against is ``tests/oracles/torch_reference.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import onnx

from lite.atomic_file import write_atomic

from .classic import alexnet, lenet5
from .control_flow import gated_refiner
from .efficientnet import efficientnet_b0, efficientnet_lite0
from .mobilenet import mobilenet_v1, mobilenet_v2, mobilenet_v3_large, mobilenet_v3_small
from .resnet import resnet18, resnet50
from .sequence import crnn, kws_gru, kws_lstm, streaming_gru
from .tasks import tiny_unet, tiny_yolo

ZOO: dict[str, Callable[..., onnx.ModelProto]] = {
    "lenet5": lenet5,
    "alexnet": alexnet,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "mobilenet_v1": mobilenet_v1,
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_small": mobilenet_v3_small,
    "mobilenet_v3_large": mobilenet_v3_large,
    "efficientnet_b0": efficientnet_b0,
    "efficientnet_lite0": efficientnet_lite0,
}
TASKS: dict[str, Callable[..., onnx.ModelProto]] = {"tiny_yolo": tiny_yolo, "tiny_unet": tiny_unet,
                                                    "gated_refiner": gated_refiner}
SEQUENCE: dict[str, Callable[..., onnx.ModelProto]] = {"kws_gru": kws_gru, "kws_lstm": kws_lstm, "crnn": crnn,
                                                       "streaming_gru": streaming_gru}


def build(name: str, **kwargs: object) -> onnx.ModelProto:
    """Build zoo or task model ``name`` with the builder's keyword arguments; ValueError for an unknown name."""
    builders = ZOO | TASKS | SEQUENCE
    if name not in builders:
        raise ValueError(f"unknown model {name!r}; valid names: {', '.join(builders)}")
    return builders[name](**kwargs)


def save(model: onnx.ModelProto, path: str | os.PathLike[str]) -> None:
    """Write ``model`` to ``path`` atomically, with the mode of an ordinary new file (``lite.atomic_file``)."""
    write_atomic(path, model.SerializeToString())


__all__ = ["ZOO", "TASKS", "SEQUENCE", "build", "save", *ZOO, *TASKS, *SEQUENCE]
