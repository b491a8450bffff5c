"""fuse_attention: the exported scaled-dot-product attention becomes one Attention node.

    scores = MatMul(q [* c], Transpose(k [* c])) [* c | / c]   (or MatMul with transpose_b)
    y = MatMul(Softmax(scores [+ mask], axis=-1), v)

as PyTorch exports nn.MultiheadAttention / F.scaled_dot_product_attention (q and k each scaled by
sqrt(1 / sqrt(D)), batch and heads merged into one axis: [B * H, S, D]) and as hand-written BERT exports do
(scores divided by sqrt(D), 4-D [B, H, S, D]). Every scalar factor on the way multiplies into `scale`. 3-D
operands [N, S, D] are one-head 4-D ones [N, 1, S, D]. The kernel then computes the scores, the softmax and the
product over all heads in two matmuls with one score buffer, and training gets one AttentionGrad.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.match import other_input, produced_by, scaled_by
from lite import dtypes
from lite.kernel import kernel_for


def _unscaled(graph: Graph, value: str) -> tuple[str, float]:
    """(source, factor) where `value` = source * factor through single-use scalar Mul / Div nodes."""
    factor = 1.0
    while True:
        node = produced_by(graph, value, "Mul", "Div")
        if node is None or graph.uses(value) != 1:
            return value, factor
        source = next((i for i in node.inputs[:2] if scaled_by(graph, node, i) is not None), None)
        if source is None:
            return value, factor
        factor *= scaled_by(graph, node, source)
        value = source


def _keys(graph: Graph, matmul: Node) -> tuple[str, float] | None:
    """(K [..., T, D], its scale) when the MatMul's second operand is K's last-two-axes transpose, scaled
    before or after the transpose; else None."""
    b, factor = _unscaled(graph, matmul.inputs[1])
    if matmul.attrs.get("transpose_b"):
        return b, factor
    node = produced_by(graph, b, "Transpose")
    perm = list(node.attrs.get("perm", [])) if node is not None else []
    rank = len(perm)
    if rank < 3 or perm != list(range(rank - 2)) + [rank - 1, rank - 2] or graph.uses(b) != 1:
        return None
    k, before = _unscaled(graph, node.inputs[0])
    return k, factor * before


def _scores(graph: Graph, softmax: Node) -> tuple[Node, str, float] | None:
    """(QK MatMul, mask or "", scale on the scores) of the Softmax's input."""
    value = softmax.inputs[0]
    add = produced_by(graph, value, "Add")
    mask = ""
    if add is not None and graph.uses(value) == 1:
        for chain in add.inputs[:2]:
            source, _ = _unscaled(graph, chain)
            if produced_by(graph, source, "MatMul") is not None and graph.uses(chain) == 1:
                value, mask = chain, other_input(add, chain)
                break
    source, factor = _unscaled(graph, value)
    matmul = produced_by(graph, source, "MatMul")
    if matmul is None or matmul.attrs.get("transpose_a") or graph.uses(source) != 1:
        return None
    return matmul, mask, factor


def _view(graph: Graph, value: str, hint: str, op: str, out: str | None = None) -> str:
    """`value` with a size-1 axis 1 inserted (Unsqueeze) or removed (Squeeze) by a new node, into `out` or a
    new value."""
    v = graph.values[value]
    if out is None:
        shape = v.shape[:1] + (1,) + v.shape[1:] if op == "Unsqueeze" else v.shape[:1] + v.shape[2:]
        out = graph.fresh(f"{hint}/{op}")
        graph.values[out] = Value(out, shape, v.dtype)
    axes = graph.add_const(np.array([1], np.int64), f"{hint}/axes")
    graph.nodes.append(Node(op, graph.fresh(f"{hint}/{op}"), [value, axes], [out]))
    return out


def _fuse_one(graph: Graph, softmax: Node) -> bool:
    rank = graph.values[softmax.inputs[0]].rank
    if softmax.attrs.get("axis", -1) % max(rank, 1) != rank - 1 or rank not in (3, 4):
        return False
    found = _scores(graph, softmax)
    readers = graph.consumers(softmax.outputs[0])
    if found is None or len(readers) != 1 or graph.uses(softmax.outputs[0]) != 1:
        return False
    out_mm, (matmul, mask, factor) = readers[0], found
    if out_mm.op != "MatMul" or out_mm.inputs[0] != softmax.outputs[0] or any(
            out_mm.attrs.get(k) for k in ("transpose_a", "transpose_b", "activation")):
        return False
    keys = _keys(graph, matmul)
    if keys is None:
        return False
    (q, q_factor), (k, k_factor), v = _unscaled(graph, matmul.inputs[0]), keys, out_mm.inputs[1]
    shapes = [graph.values[x].shape for x in (q, k, v)]
    scores = graph.values[matmul.outputs[0]].shape
    if not _runs(graph.values[q].dtype):
        return False
    if any(len(s) != rank or min(s) < 0 for s in shapes) or not shapes[0][:-2] == shapes[1][:-2] == \
            shapes[2][:-2] or mask and not _fits(graph.values[mask], scores) or \
            graph.values[softmax.inputs[0]].shape != scores:
        return False
    inputs = [q, k, v] + ([mask] if mask else [])
    name, y = out_mm.name, out_mm.outputs[0]
    if rank == 3:      # one head: [N, S, D] -> [N, 1, S, D]; a 3-D mask [N, S, T] likewise
        inputs = [_view(graph, x, f"{name}/{x}", "Unsqueeze") if i < 3 or graph.values[x].rank == 3 else x
                  for i, x in enumerate(inputs)]
        y4 = graph.fresh(f"{name}/heads")
        graph.values[y4] = Value(y4, shapes[0][:1] + (1,) + shapes[0][1:2] + shapes[2][-1:], graph.values[y].dtype)
        _view(graph, y4, name, "Squeeze", out=y)
    graph.remove_node(out_mm)
    graph.nodes.append(Node("Attention", graph.fresh(f"{name}/attention"), inputs, [y4 if rank == 3 else y],
                            {"scale": factor * q_factor * k_factor}))
    return True


def _fits(mask: Value, scores: tuple[int, ...]) -> bool:
    """A float mask the kernel reads as the Add did: at most the scores' rank and a full last axis (the
    kernel pads a shorter one with masked keys, where the Add would broadcast it)."""
    return mask.dtype.kind == "f" and 1 <= mask.rank <= len(scores) and mask.shape[-1] == scores[-1]


def _runs(dtype: np.dtype) -> bool:
    """Whether the Attention kernel runs `dtype` (narrow floats through its float32 kernel); a block of another
    type (float64) keeps its MatMul / Softmax nodes."""
    type_id = dtypes.from_numpy(dtype)
    return kernel_for("Attention", type_id) is not None or type_id in dtypes.NARROW_FLOATS


def fuse_attention(graph: Graph) -> None:
    for softmax in graph.op_nodes("Softmax"):
        _fuse_one(graph, softmax)
    graph.prune()
