"""fuse_batchnorm: fold an inference BatchNorm into the Conv2D / Conv2DTranspose / FullConnection before it.

y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta  ==  conv'(x) + b'  with the weights of each output
channel scaled by gamma / sqrt(var + eps).
"""
from __future__ import annotations

from converter.ir import Graph, Node
from lite.fold_batchnorm import fold_batchnorm

# output-channel axis of each producer's weight (Conv2D OHWI, Conv2DTranspose IHWO, FullConnection [out, in])
_CHANNEL_AXIS = {"Conv2D": 0, "Conv2DTranspose": 3, "FullConnection": 0}


def _channel_axis(graph: Graph, producer: Node) -> int:
    """The BatchNorm axis that means "output channel" for this producer's output (its last axis)."""
    return graph.values[producer.outputs[0]].rank - 1


def _fusable(graph: Graph, bn: Node) -> Node | None:
    producer = graph.producer(bn.inputs[0])
    if producer is None or producer.op not in _CHANNEL_AXIS or graph.uses(bn.inputs[0]) != 1:
        return None
    if producer.attrs.get("activation", 0) or producer.op == "Conv2DTranspose" and producer.attrs.get("group", 1) != 1:
        return None
    rank = graph.values[bn.inputs[0]].rank
    if bn.attrs.get("axis", 1) % rank != _channel_axis(graph, producer):
        return None
    params = [graph.const(i) for i in bn.inputs[1:5]] + [graph.const(producer.inputs[1])]
    return producer if all(p is not None for p in params) else None


def fuse_batchnorm(graph: Graph) -> None:
    for bn in graph.op_nodes("BatchNorm"):
        producer = _fusable(graph, bn)
        if producer is None:
            continue
        bias_in = producer.inputs[2] if len(producer.inputs) > 2 and producer.inputs[2] else None
        weight, bias = fold_batchnorm(graph.const(producer.inputs[1]), graph.const(bias_in) if bias_in else None,
                                      *(graph.const(i) for i in bn.inputs[1:5]), bn.attrs.get("epsilon", 1e-5),
                                      _CHANNEL_AXIS[producer.op])
        producer.inputs[1:] = [graph.add_const(weight, producer.inputs[1] + "_bn"),
                               graph.add_const(bias, producer.name + "_bias_bn")]
        graph.remove_node(bn)
        out = bn.outputs[0]
        graph.values.pop(out)
        graph.rename_value(producer.outputs[0], out)
    graph.prune()
