"""fuse_batchnorm: fold an inference BatchNorm into the op before it (`traits(op).batchnorm_folds`: Conv2D,
Conv2DTranspose, FullConnection) when that op's output feeds only the BatchNorm.

y = gamma * (conv(x) + b - mean) / sqrt(var + eps) + beta  ==  conv'(x) + b'  with the weights of each output
channel scaled by gamma / sqrt(var + eps). The rule and the arithmetic are `lite.fold_batchnorm`'s.
"""
from __future__ import annotations

from converter.ir import Graph, Node
from lite.fold_batchnorm import fold_axis, fold_batchnorm
from lite.traits import traits


def _fusable(graph: Graph, bn: Node) -> tuple[Node, int] | None:
    """(producer, its weight's channel axis) when `bn` folds into its input's producer."""
    producer = graph.producer(bn.inputs[0])
    if producer is None or graph.uses(bn.inputs[0]) != 1:
        return None
    t = traits(producer.op)
    weight = graph.const(producer.inputs[t.weight_input]) if t.batchnorm_folds else None
    if weight is None or any(graph.const(i) is None for i in bn.inputs[1:5]):
        return None
    axis = fold_axis(producer.op, producer.attrs.get("activation", 0), weight.shape,
                     graph.values[bn.inputs[0]].shape, bn.attrs.get("axis", 1))
    return None if axis is None else (producer, axis)


def fuse_batchnorm(graph: Graph) -> None:
    for bn in graph.op_nodes("BatchNorm"):
        found = _fusable(graph, bn)
        if found is None:
            continue
        producer, axis = found
        t = traits(producer.op)
        w_in, b_in = producer.inputs[t.weight_input], t.bias_input
        bias_in = producer.inputs[b_in] if len(producer.inputs) > b_in and producer.inputs[b_in] else None
        weight, bias = fold_batchnorm(graph.const(w_in), graph.const(bias_in) if bias_in else None,
                                      *(graph.const(i) for i in bn.inputs[1:5]), bn.attrs.get("epsilon", 1e-5), axis)
        inputs = producer.inputs + [""] * (b_in + 1 - len(producer.inputs))
        inputs[t.weight_input] = graph.add_const(weight, w_in + "_bn")
        inputs[b_in] = graph.add_const(bias, producer.name + "_bias_bn")
        producer.inputs = inputs
        graph.remove_node(bn)
        out = bn.outputs[0]
        graph.values.pop(out)
        graph.rename_value(producer.outputs[0], out)
    graph.prune()
