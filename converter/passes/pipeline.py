"""The optimisation pipeline: named passes in order; any can be switched off by name."""
from __future__ import annotations

from functools import partial
from typing import Callable, Iterable

from converter.ir import Graph
from converter.passes.conv_before_resize import conv_before_resize
from converter.passes.fold_constants import fold_constants
from converter.passes.fuse_activation import fuse_activation, split_activation
from converter.passes.fuse_affine import fuse_affine
from converter.passes.fuse_attention import fuse_attention
from converter.passes.fuse_batchnorm import fuse_batchnorm
from converter.passes.fuse_gelu import fuse_gelu
from converter.passes.fuse_layer_norm import fuse_layer_norm
from converter.passes.fuse_one_hot import fuse_one_hot
from converter.passes.fuse_pad import fuse_pad
from converter.passes.fuse_prelu import fuse_prelu
from converter.passes.fuse_residual import fuse_residual
from converter.passes.fuse_softmax import fuse_softmax
from converter.passes.remove_identity import remove_identity
from converter.passes.sink_squeeze import sink_squeeze
from converter.passes.to_nhwc import to_nhwc

PASSES: dict[str, Callable[[Graph], None]] = {
    "fold_constants": fold_constants,
    "remove_identity": remove_identity,
    "fuse_layer_norm": fuse_layer_norm,
    "fuse_gelu": fuse_gelu,
    "fuse_softmax": fuse_softmax,
    "fuse_attention": fuse_attention,
    "to_nhwc": to_nhwc,
    "sink_squeeze": sink_squeeze,
    "fuse_pad": fuse_pad,
    "fuse_batchnorm": fuse_batchnorm,
    "fuse_affine": fuse_affine,
    "fuse_one_hot": fuse_one_hot,
    "fuse_activation": fuse_activation,
    "conv_before_resize": conv_before_resize,
    "fuse_residual": fuse_residual,
    "fuse_prelu": fuse_prelu,
}


# How a graph to be trained runs a pass: the fusions not at all (every parameter stays a tensor of its own, no
# BatchNorm folded into a weight, and every op keeps its gradient rule), activations fused by the source model
# (TFLite's) split off; remove_identity keeps train-mode ops.
FOR_TRAINING: dict[str, Callable[[Graph], None] | None] = {
    **dict.fromkeys(("fuse_layer_norm", "fuse_gelu", "fuse_softmax", "fuse_attention", "fuse_one_hot", "fuse_pad",
                     "fuse_batchnorm", "fuse_affine", "conv_before_resize", "fuse_residual", "fuse_prelu")),
    "fuse_activation": split_activation,
    "remove_identity": partial(remove_identity, training=True),
}


def optimize(graph: Graph, disabled: Iterable[str] = (), training: bool = False) -> Graph:
    """Run every pass not in `disabled`, in order (as `FOR_TRAINING` says for a graph to be trained), then
    re-infer shapes for the exporter. The bodies of control-flow nodes are optimised first, each as a graph of
    its own (its inputs and outputs keep their names and layout)."""
    skip = set(disabled)
    unknown = skip - PASSES.keys()
    if unknown:
        raise ValueError(f"unknown passes {sorted(unknown)}; passes are {list(PASSES)}")
    for node in graph.nodes:
        for body in node.bodies:
            optimize(body, skip, training)
    for name, run in PASSES.items():
        run = FOR_TRAINING.get(name, run) if training else run
        if run is not None and name not in skip:
            run(graph)
    fold_constants(graph)
    return graph
