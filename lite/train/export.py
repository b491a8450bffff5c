"""Inference export of a trained model: the forward nodes only, current weights, BatchNorm folded.

The result is a plain `.ms` (no subgraphs) for a `LiteSession`. `fold_batchnorms` merges an inference BatchNorm
into the Conv2D/FullConnection that feeds it alone (the rule and arithmetic of `lite.fold_batchnorm`, as the
converter's `fuse_batchnorm`), `drop_identities` bypasses inference Dropout/Identity, `chain` joins a frozen
backbone and its head into one graph.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

import numpy as np

from lite import dtypes
from lite.fold_batchnorm import fold_axis, fold_batchnorm
from lite.format import mspy
from lite.model import NodeDef, TensorDef
from lite.rewrites import returns_input
from lite.traits import traits


@dataclass
class Piece:
    """A forward graph: a tensor table (variables carrying their current values), nodes in execution order,
    graph inputs and outputs (tensor indices)."""
    name: str
    tensors: list[TensorDef]
    nodes: list[NodeDef]
    inputs: list[int]
    outputs: list[int]


def chain(first: Piece, second: Piece) -> Piece:
    """One graph where `second`'s first input reads `first`'s first output."""
    offset = len(first.tensors)
    link = {second.inputs[0]: first.outputs[0]}

    def move(i: int) -> int:
        return link.get(i, i + offset) if i >= 0 else i

    tensors = first.tensors + [replace(t, index=t.index + offset) for t in second.tensors]
    nodes = first.nodes + [replace(n, inputs=[move(i) for i in n.inputs], outputs=[move(o) for o in n.outputs])
                           for n in second.nodes]
    return Piece(second.name, tensors, nodes, first.inputs + [move(i) for i in second.inputs[1:]],
                 [move(o) for o in second.outputs])


def _readers(nodes: list[NodeDef]) -> Counter:
    return Counter(i for n in nodes for i in n.inputs if i >= 0)


def drop_identities(piece: Piece) -> Piece:
    """Bypass nodes that return their input (inference Dropout, Identity, ...: `lite.rewrites.returns_input`),
    kept when their output is a graph output."""
    nodes, alias = [], {}
    for node in piece.nodes:
        inputs = [alias.get(i, i) for i in node.inputs]
        one = len(node.outputs) == 1 and inputs and inputs[0] >= 0
        x, y = (piece.tensors[t] for t in (inputs[0], node.outputs[0])) if one else (None, None)
        if y is not None and node.outputs[0] not in piece.outputs and returns_input(
                node.op, getattr(node.attrs, "training", False), getattr(node.attrs, "perm", None),
                (x.dims, x.data_type), (y.dims, y.data_type)):
            alias[node.outputs[0]] = inputs[0]
        else:
            nodes.append(replace(node, inputs=inputs))
    return replace(piece, nodes=nodes)


def fold_batchnorms(piece: Piece) -> Piece:
    """Fold every inference BatchNorm into the op that is its input's only producer and reader when
    `lite.fold_batchnorm.fold_axis` allows it and the weights are float constants of one value per channel read
    by no other node (anything else stays as it is, for the compiler to accept or refuse)."""
    tensors, nodes = list(piece.tensors), list(piece.nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    readers = _readers(nodes)
    dropped = set()
    for k, bn in enumerate(nodes):
        if bn.op != "BatchNorm" or bn.attrs.training or len(bn.inputs) < 5 or bn.inputs[0] not in producer:
            continue
        p = producer[bn.inputs[0]]
        conv = nodes[p]
        t = traits(conv.op)
        if not t.batchnorm_folds or len(conv.inputs) <= t.weight_input or conv.inputs[t.weight_input] < 0:
            continue
        weight = conv.inputs[t.weight_input]
        bias = conv.inputs[t.bias_input] if len(conv.inputs) > t.bias_input else -1
        params = [tensors[i] for i in bn.inputs[1:5]]
        axis = fold_axis(conv.op, conv.attrs.activation, tensors[weight].dims, tensors[bn.inputs[0]].dims,
                         bn.attrs.axis)
        if (axis is None or readers[bn.inputs[0]] != 1 or bn.inputs[0] in piece.outputs
                or not all(s.is_const for s in params) or not tensors[weight].is_const or readers[weight] != 1
                or (bias >= 0 and (not tensors[bias].is_const or readers[bias] != 1))
                or not _per_channel(tensors[weight].data, axis, [s.data for s in params]
                                    + ([tensors[bias].data] if bias >= 0 else []))):
            continue
        w, b = fold_batchnorm(tensors[weight].data, tensors[bias].data if bias >= 0 else None,
                              *(s.data for s in params), bn.attrs.epsilon, axis)
        tensors[weight] = replace(tensors[weight], data=w)
        if bias < 0:
            bias = len(tensors)
            tensors.append(TensorDef(bias, f"{conv.name}/bias", tensors[weight].node_type, dtypes.DataType.FLOAT32,
                                     tuple(b.shape), tensors[weight].format, b))
        else:
            tensors[bias] = replace(tensors[bias], data=b)
        inputs = conv.inputs + [-1] * (t.bias_input + 1 - len(conv.inputs))
        inputs[t.bias_input] = bias
        nodes[p] = replace(conv, inputs=inputs, outputs=[bn.outputs[0]])
        dropped.add(k)
    return replace(piece, tensors=tensors, nodes=[n for k, n in enumerate(nodes) if k not in dropped])


def _per_channel(weight: np.ndarray, axis: int, vectors: list[np.ndarray]) -> bool:
    """Whether `weight` is float and the BatchNorm parameters (and bias) folding into it are float vectors of one
    value per channel of its `axis`."""
    return (weight.dtype.kind == "f" and weight.ndim > axis
            and all(v.dtype.kind == "f" and v.shape == (weight.shape[axis],) for v in vectors))


def compact(piece: Piece) -> Piece:
    """Only the tensors the graph refers to, re-indexed in order of first use."""
    order: dict[int, int] = {}
    for i in [*piece.inputs, *(t for n in piece.nodes for t in (*n.inputs, *n.outputs)), *piece.outputs]:
        if i >= 0 and i not in order:
            order[i] = len(order)

    def move(ids: list[int]) -> list[int]:
        return [order[i] if i >= 0 else i for i in ids]

    tensors = [replace(piece.tensors[i], index=k) for i, k in order.items()]
    nodes = [replace(n, inputs=move(n.inputs), outputs=move(n.outputs)) for n in piece.nodes]
    return Piece(piece.name, tensors, nodes, move(piece.inputs), move(piece.outputs))


def inference_piece(pieces: list[Piece]) -> Piece:
    """The pieces chained in order, identities dropped and BatchNorm folded; tensors keep their indices (those
    folding adds come after them). A training session's Eval mode runs it, so it computes what the export does."""
    piece = pieces[0]
    for nxt in pieces[1:]:
        piece = chain(piece, nxt)
    return fold_batchnorms(drop_identities(piece))


def inference_bytes(pieces: list[Piece]) -> bytes:
    """The `.ms` of `inference_piece(pieces)`, only the tensors it refers to."""
    piece = compact(inference_piece(pieces))
    return mspy.write(piece.name, piece.tensors, piece.nodes, piece.inputs, piece.outputs)
