"""Inference export of a trained model: the forward nodes only, current weights, BatchNorm folded.

The result is a plain `.ms` (no subgraphs) for a `LiteSession`. `fold_batchnorms` merges an inference BatchNorm
into the Conv2D/FullConnection that feeds it alone (weights in float64, `lite.fold_batchnorm`), `drop_identities`
bypasses inference Dropout/Identity, `chain` joins a frozen backbone and its head into one graph.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from lite import dtypes
from lite.fold_batchnorm import fold_batchnorm
from lite.model import NodeDef, TensorDef
from lite.serialize import serialize

FOLDABLE_PRODUCERS = ("Conv2D", "FullConnection")    # weights [out, ...]: output channels on axis 0
NO_ACTIVATION = 0


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
    """Bypass inference Dropout and Identity nodes (kept when their output is a graph output)."""
    nodes, alias = [], {}
    for node in piece.nodes:
        inputs = [alias.get(i, i) for i in node.inputs]
        identity = node.op == "Identity" or (node.op == "Dropout" and not node.attrs.training)
        if identity and node.outputs[0] not in piece.outputs:
            alias[node.outputs[0]] = inputs[0]
        else:
            nodes.append(replace(node, inputs=inputs))
    return replace(piece, nodes=nodes)


def fold_batchnorms(piece: Piece) -> Piece:
    """Fold every inference BatchNorm on the channel (last) axis into the Conv2D/FullConnection without fused
    activation that is its input's only producer and reader, when the weights are constants read by no
    other node."""
    tensors, nodes = list(piece.tensors), list(piece.nodes)
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    readers = _readers(nodes)
    dropped = set()
    for k, bn in enumerate(nodes):
        if bn.op != "BatchNorm" or bn.attrs.training or bn.inputs[0] not in producer:
            continue
        p = producer[bn.inputs[0]]
        conv = nodes[p]
        rank = len(tensors[bn.inputs[0]].dims)
        weight = conv.inputs[1]
        bias = conv.inputs[2] if len(conv.inputs) > 2 else -1
        params = [tensors[i] for i in bn.inputs[1:5]]
        if (conv.op not in FOLDABLE_PRODUCERS or conv.attrs.activation != NO_ACTIVATION
                or readers[bn.inputs[0]] != 1 or bn.inputs[0] in piece.outputs
                or rank < 2 or bn.attrs.axis % rank != rank - 1
                or not all(t.is_const for t in params) or not tensors[weight].is_const or readers[weight] != 1
                or (bias >= 0 and (not tensors[bias].is_const or readers[bias] != 1))):
            continue
        w, b = fold_batchnorm(tensors[weight].data, tensors[bias].data if bias >= 0 else None,
                              *(t.data for t in params), bn.attrs.epsilon, channel_axis=0)
        tensors[weight] = replace(tensors[weight], data=w)
        if bias < 0:
            bias = len(tensors)
            tensors.append(TensorDef(bias, f"{conv.name}/bias", tensors[weight].node_type, dtypes.DataType.FLOAT32,
                                     tuple(b.shape), tensors[weight].format, b))
        else:
            tensors[bias] = replace(tensors[bias], data=b)
        nodes[p] = replace(conv, inputs=[conv.inputs[0], weight, bias], outputs=[bn.outputs[0]])
        dropped.add(k)
    return replace(piece, tensors=tensors, nodes=[n for k, n in enumerate(nodes) if k not in dropped])


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


def inference_bytes(pieces: list[Piece]) -> bytes:
    """The `.ms` of the pieces chained in order, identities dropped and BatchNorm folded."""
    piece = pieces[0]
    for nxt in pieces[1:]:
        piece = chain(piece, nxt)
    piece = compact(fold_batchnorms(drop_identities(piece)))
    return serialize(piece.name, piece.tensors, piece.nodes, piece.inputs, piece.outputs)
