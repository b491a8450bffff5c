"""fuse_attention: the exported scaled-dot-product attention becomes one Attention node.

    scores = MatMul(q [* c], Transpose(k [* c])) [* c | / c]   (or MatMul with transpose_b)
    y = MatMul(Softmax(scores [+ mask], axis=-1), v)

as PyTorch exports nn.MultiheadAttention / F.scaled_dot_product_attention (q and k each scaled by
sqrt(1 / sqrt(D)), batch and heads merged into one axis: [B * H, S, D]) and as hand-written BERT exports do
(scores divided by sqrt(D), 4-D [B, H, S, D]). Every scalar factor on the way multiplies into `scale`. 3-D
operands [N, S, D] are one-head 4-D ones [N, 1, S, D]. The kernel then computes the scores, the softmax and the
product over all heads in two matmuls with one score buffer, and training gets one AttentionGrad.

Where the heads are split off projections [N, L, H * D] by Reshape + Transpose and merged back the same way (a
BERT layer: q, v `Transpose(Reshape(x, [N, L, H, D]), [0, 2, 1, 3])`, k with [0, 2, 3, 1], y `Reshape(Transpose(y4,
[0, 2, 1, 3]), [N, L, H * D])`), the node reads and writes the 3-D projections with q_num_heads / kv_num_heads
(`_merged_heads`): no Transpose or Reshape is left. That form is taken with shapes known only at run time too (a
Reshape target built from Shape nodes, as exports with dynamic axes write it), when the target's N and L are
provably the projection's own.
"""
from __future__ import annotations

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.match import only_reader, other_input, produced_by, scaled_by
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
    keys, key_perm = _keys(graph, matmul), [0, 2, 1, 3]
    if keys is None:          # K^T [B, H, D, T] split straight off its projection: only the 3-D form takes it
        keys, key_perm = _unscaled(graph, matmul.inputs[1]), [0, 2, 3, 1]
    (q, q_factor), (k, k_factor), v = _unscaled(graph, matmul.inputs[0]), keys, out_mm.inputs[1]
    shapes = [graph.values[x].shape for x in (q, k, v)]
    scores = graph.values[matmul.outputs[0]].shape
    if not _runs(graph.values[q].dtype):
        return False
    if any(len(s) != rank for s in shapes) or mask and not _fits(graph.values[mask], scores) or \
            graph.values[softmax.inputs[0]].shape != scores:
        return False
    inputs = [q, k, v] + ([mask] if mask else [])
    name, y = out_mm.name, out_mm.outputs[0]
    if rank == 4 and _merged_heads(graph, inputs, out_mm, factor * q_factor * k_factor, key_perm):
        return True
    if key_perm != [0, 2, 1, 3] or any(len(s) != rank or min(s) < 0 for s in shapes) or not shapes[0][:-2] == shapes[1][:-2] == shapes[2][:-2]:
        return False
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


def _merged_heads(graph: Graph, inputs: list[str], out_mm: Node, scale: float, key_perm: list[int]) -> bool:
    """The 3-D form: when q, k ([B, H, T, D], or [B, H, D, T] with `key_perm` [0, 2, 3, 1]) and v are each split
    off a 3-D projection and y is merged back into one, one Attention node on the projections replaces the whole
    block. Returns whether it did."""
    split = [_split_off(graph, x, perm) for x, perm in zip(inputs[:3], ([0, 2, 1, 3], key_perm, [0, 2, 1, 3]))]
    merge = _merged_back(graph, out_mm.outputs[0])
    if None in split or merge is None or split[1][1] != split[2][1]:
        return False
    (q3, heads), (k3, kv_heads), (v3, _) = split
    transpose, reshape, rows = merge
    if not _same_rows(graph, rows, q3):
        return False
    for node in (out_mm, transpose, reshape):
        graph.remove_node(node)
    graph.nodes.append(Node("Attention", graph.fresh(f"{out_mm.name}/attention"), [q3, k3, v3, *inputs[3:]],
                            [reshape.outputs[0]], {"scale": scale, "q_num_heads": heads, "kv_num_heads": kv_heads}))
    return True


def _split_off(graph: Graph, value: str, perm: list[int]) -> tuple[str, int] | None:
    """(x [N, L, H * D], H) when `value` = Transpose(Reshape(x, [N, L, H, D]), perm), each read once."""
    node = produced_by(graph, value, "Transpose")
    if node is None or list(node.attrs.get("perm", [])) != perm or graph.uses(value) != 1:
        return None
    reshape = produced_by(graph, node.inputs[0], "Reshape")
    if reshape is None or graph.uses(node.inputs[0]) != 1 or graph.values[reshape.inputs[0]].rank != 3:
        return None
    x = reshape.inputs[0]
    target = _target(graph, reshape)
    if target is None or len(target) != 4 or not isinstance(target[2], int) or target[2] < 1 or \
            not _same_rows(graph, target[:2], x):
        return None
    return x, target[2]


def _merged_back(graph: Graph, y4: str) -> tuple[Node, Node, list] | None:
    """(Transpose, Reshape, the Reshape's target) when y4 [B, H, S, Dv] is read once, by Transpose [0, 2, 1, 3],
    whose output a Reshape to 3-D alone reads."""
    transpose = only_reader(graph, y4, "Transpose")
    if transpose is None or list(transpose.attrs.get("perm", [])) != [0, 2, 1, 3]:
        return None
    reshape = only_reader(graph, transpose.outputs[0], "Reshape")
    target = None if reshape is None else _target(graph, reshape)
    if target is None or len(target) != 3:
        return None
    return transpose, reshape, target[:2]


def _target(graph: Graph, reshape: Node) -> list | None:
    """A Reshape's target shape, entry by entry: an int where constant, (source, axis) where it is read at run
    time as Unsqueeze(Gather(Shape(source), axis)); None when it is built otherwise."""
    if reshape.attrs.get("allowzero", 0) or len(reshape.inputs) < 2:
        return None
    constant = graph.const(reshape.inputs[1])
    if constant is not None:
        return [int(v) for v in constant.reshape(-1)]
    concat = produced_by(graph, reshape.inputs[1], "Concat")
    if concat is None:
        return None
    entries: list = []
    for piece in concat.inputs:
        constant = graph.const(piece)
        unsqueeze = produced_by(graph, piece, "Unsqueeze") if constant is None else None
        gather = produced_by(graph, unsqueeze.inputs[0], "Gather") if unsqueeze is not None else None
        shape = produced_by(graph, gather.inputs[0], "Shape") if gather is not None else None
        axis = graph.const(gather.inputs[1]) if shape is not None else None
        if constant is not None:
            entries += [int(v) for v in constant.reshape(-1)]
        elif axis is not None and axis.ndim == 0 and gather.attrs.get("axis", 0) == 0 and \
                shape.attrs.get("start", 0) == 0:
            entries.append((shape.inputs[0], int(axis)))
        else:
            return None
    return entries


def _same_rows(graph: Graph, leading: list, x: str) -> bool:
    """Whether the two leading target entries are x's own first two dims: 0 (copied), x's known size, or read
    from a value whose leading dims x keeps (`_row_sources`)."""
    sources = _row_sources(graph, x)
    dims = graph.values[x].shape
    return len(leading) == 2 and all(
        entry == 0 or (isinstance(entry, int) and entry == dims[axis] >= 0)
        or (isinstance(entry, tuple) and entry[0] in sources and entry[1] == axis
            and graph.values[entry[0]].rank == 3) for axis, entry in enumerate(leading))


def _row_sources(graph: Graph, x: str) -> set[str]:
    """x and the values it is computed from row by row: back through a dense layer (FullConnection, or MatMul by
    a 2-D constant) and an elementwise op with a constant of rank <= 1 (a bias or scale)."""
    sources = {x}
    while (node := graph.producer(x)) is not None and len(node.inputs) >= 2:
        constant = [graph.const(i) is not None for i in node.inputs[:2]]
        if node.op == "FullConnection" or node.op == "MatMul" and constant[1] and graph.values[node.inputs[1]].rank == 2:
            x = node.inputs[0]
        elif node.op in ("Add", "Sub", "Mul", "Div") and len(node.inputs) == 2 and constant.count(True) == 1 and \
                graph.values[node.inputs[constant.index(True)]].rank <= 1:
            x = node.inputs[constant.index(False)]
        else:
            break
        sources.add(x)
    return sources


def _fits(mask: Value, scores: tuple[int, ...]) -> bool:
    """A float mask the kernel reads as the Add did: at most the scores' rank and a full last axis (the
    kernel pads a shorter one with masked keys, where the Add would broadcast it). A last axis known only at run
    time is taken unless it is a literal 1: a mask built from an input's length (a padding mask) has the keys'."""
    last, keys = mask.shape[-1] if mask.rank else 1, scores[-1]
    return mask.dtype.kind == "f" and 1 <= mask.rank <= len(scores) and (
        last == keys or -1 in (last, keys) and last != 1)


def _runs(dtype: np.dtype) -> bool:
    """Whether the Attention kernel runs `dtype` (narrow floats through its float32 kernel); a block of another
    type (float64) keeps its MatMul / Softmax nodes."""
    type_id = dtypes.from_numpy(dtype)
    return kernel_for("Attention", type_id) is not None or type_id in dtypes.NARROW_FLOATS


def fuse_attention(graph: Graph) -> None:
    for softmax in graph.op_nodes("Softmax"):
        _fuse_one(graph, softmax)
    graph.prune()
