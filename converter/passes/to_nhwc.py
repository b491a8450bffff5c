"""to_nhwc: make the graph NHWC inside by moving and cancelling transposes.

Importers wrap every layout-bound op (Conv2D, Pooling, ...) as NCHW -> Transpose -> op (NHWC) -> Transpose ->
NCHW. This pass pushes each transpose down through ops that do not care about layout (elementwise ops, with
their constants permuted) or whose axis can be renumbered (Concat, Softmax, Reduce, BatchNorm, ...), merges
consecutive transposes and drops identities, so transposes remain only at the graph's borders and around ops
that truly need the source layout (e.g. Flatten of a non-trivial spatial map). A transpose that moves only
size-1 dims becomes a free Reshape.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from converter.ir import Graph, Node, Value
from converter.passes.remove_identity import bypass
from converter.shape_inference import infer_node
from lite.traits import AXES_INPUT, AXIS, BEGIN_END, ELEMENTWISE, ONE_PER_AXIS, PER_AXIS, traits
from schema import fb

Perm = tuple[int, ...]


def _compose(first: Perm, second: Perm) -> Perm:
    """The single perm equal to transposing by `first`, then by `second`."""
    return tuple(first[i] for i in second)


def _inverse(perm: Perm) -> Perm:
    return tuple(int(i) for i in np.argsort(perm))


def _transpose_input(graph: Graph, name: str) -> tuple[str, Perm] | None:
    node = graph.producer(name) if name else None
    if node is None or node.op != "Transpose":
        return None
    return node.inputs[0], tuple(int(p) for p in node.attrs["perm"])


def _permute_const(array: np.ndarray, perm: Perm) -> np.ndarray:
    """A constant that broadcasts against T(x, perm) rewritten to broadcast against x."""
    rank = len(perm)
    full = array.reshape((1,) * (rank - array.ndim) + array.shape)
    return np.ascontiguousarray(full.transpose(_inverse(perm)))


def _rewrite(graph: Graph, node: Node, inputs: list[str], attrs: dict, out_perm: Perm) -> None:
    """Replace `node` by the same op on untransposed inputs followed by Transpose(out_perm) on each output."""
    inner = Node(node.op, node.name, inputs, [graph.fresh(o + "_nhwc") for o in node.outputs], attrs,
                 quant_type=node.quant_type, rounding=node.rounding)
    for src, dst in zip(inner.outputs, node.outputs):    # same values, so the same quantization parameters
        old = graph.values[dst]
        graph.values[src] = Value(src, (), old.dtype, quant_params=list(old.quant_params))
    at = graph.nodes.index(node)
    graph.nodes[at] = inner
    infer_node(graph, inner)
    for k, (src, dst) in enumerate(zip(inner.outputs, node.outputs)):
        t = Node("Transpose", graph.fresh(f"{node.name}/to_source_layout_{k}"), [src], [dst],
                 {"perm": list(out_perm)})
        graph.nodes.insert(at + 1 + k, t)
        graph.values[src].format = fb.Format.NHWC if len(out_perm) == 4 else fb.Format.ND


def _push_elementwise(graph: Graph, node: Node) -> bool:
    """Value-by-value ops; not when a value has per-channel quantization parameters (their axis would move)."""
    if any(len(graph.values[v].quant_params) > 1 for v in (*node.inputs, *node.outputs) if v):
        return False
    data = [(i, _transpose_input(graph, i)) for i in node.inputs]
    perms = {t[1] for _, t in data if t}
    if len(perms) != 1:
        return False
    perm = perms.pop()
    new_inputs = []
    for name, t in data:
        if t:
            new_inputs.append(t[0])
        elif graph.const(name) is not None and graph.values[name].rank <= len(perm):
            new_inputs.append(graph.add_const(_permute_const(graph.const(name), perm), name + "_nhwc"))
        elif graph.values[name].rank == 0 and not graph.values[name].dynamic:   # a dynamic rank is a fallback
            new_inputs.append(name)
        else:
            return False
    if any(graph.values[i].rank != len(perm) for i, t in data if t):
        return False
    _rewrite(graph, node, new_inputs, dict(node.attrs), perm)
    return True


def _push_axis_attr(graph: Graph, node: Node) -> bool:
    """Ops with an `axis` attribute: every non-const data input must come through the same transpose."""
    layout = traits(node.op).layout
    ts = [_transpose_input(graph, i) for i in node.inputs]
    data_inputs = node.inputs if layout.all_inputs else node.inputs[:1]
    if not all(ts[k] for k in range(len(data_inputs))) or len({ts[k][1] for k in range(len(data_inputs))}) != 1:
        return False
    perm = ts[0][1]
    rank = len(perm)
    attrs = dict(node.attrs)
    attrs["axis"] = perm[attrs.get("axis", layout.axis_default) % rank]
    inputs = [ts[k][0] for k in range(len(data_inputs))] + node.inputs[len(data_inputs):]
    _rewrite(graph, node, inputs, attrs, perm)
    return True


def _push_axes_input(graph: Graph, node: Node) -> bool:
    """Reduce with keep_dims: the const `axes` input is renumbered."""
    t = _transpose_input(graph, node.inputs[0])
    if t is None or not node.attrs.get("keep_dims", True):
        return False
    axes_name = node.inputs[1] if len(node.inputs) > 1 else ""
    perm = t[1]
    inputs = [t[0]]
    if axes_name:
        axes = graph.const(axes_name)
        if axes is None:
            return False
        inputs.append(graph.add_const(np.array([perm[a % len(perm)] for a in axes.ravel()], np.int64),
                                      axes_name + "_nhwc"))
    _rewrite(graph, node, inputs, dict(node.attrs), perm)
    return True


def _permute_per_axis(values: np.ndarray, kind: str, perm: Perm) -> np.ndarray:
    """Parameters given per axis of T(x, perm), rearranged per axis of x."""
    inverse = list(_inverse(perm))
    flat = values.ravel()
    if kind == ONE_PER_AXIS:
        return flat[inverse]
    rank = len(perm)
    return np.concatenate([flat[:rank][inverse], flat[rank:][inverse]])


def _push_per_axis_inputs(graph: Graph, node: Node) -> bool:
    """Pad and Resize: constant per-axis parameters (pads, roi, scales, sizes) are permuted."""
    t = _transpose_input(graph, node.inputs[0])
    if t is None:
        return False
    kinds = dict(traits(node.op).layout.per_axis)
    perm = t[1]
    inputs = [t[0]]
    for k, name in enumerate(node.inputs[1:], start=1):
        kind = kinds.get(k)
        value = graph.const(name) if name else None
        if kind is None or not name or value is None or value.size == 0:
            if kind is not None and name and value is None:
                return False
            inputs.append(name)
            continue
        if value.size != (2 if kind == BEGIN_END else 1) * len(perm):
            return False
        inputs.append(graph.add_const(_permute_per_axis(value, kind, perm), name + "_nhwc"))
    _rewrite(graph, node, inputs, dict(node.attrs), perm)
    return True


def _block_move_nhwc(op: str, crd: bool, b: int, shape: tuple[int, ...]) -> tuple[list[int], Perm, list[int]]:
    """DepthToSpace / SpaceToDepth of an NHWC tensor of `shape` as (split shape, perm, joined shape): each pixel's
    channels move as whole runs (DCR mode: runs of C / b²; CRD: of single floats)."""
    _, h, w, c = shape
    if op == "DepthToSpace":
        d = c // (b * b)
        split = [0, h, w, d, b, b] if crd else [0, h, w, b, b, d]
        return split, (0, 1, 4, 2, 5, 3) if crd else (0, 1, 3, 2, 4, 5), [0, h * b, w * b, d]
    joined = [0, h // b, w // b, c * b * b]
    return [0, h // b, b, w // b, b, c], (0, 1, 3, 5, 2, 4) if crd else (0, 1, 3, 2, 4, 5), joined


def _push_block_move(graph: Graph, node: Node) -> bool:
    """DepthToSpace and SpaceToDepth (NCHW ops) of an NHWC tensor seen through a Transpose: done in NHWC as
    Reshape, Transpose, Reshape, one copy instead of three (MediaPipe's pose detector: 0.71 of 10.6 ms on one
    thread went to those copies and the NCHW Pads between them)."""
    t = _transpose_input(graph, node.inputs[0])
    x = graph.values[t[0]] if t else None
    if (x is None or t[1] != (0, 3, 1, 2) or x.dynamic or not x.static or x.rank != 4
            or any(len(graph.values[v].quant_params) > 1 for v in (t[0], *node.outputs))):
        return False
    b = int(node.attrs.get("block_size", 0))
    _, h, w, c = x.shape
    if b < 1 or (c % (b * b) if node.op == "DepthToSpace" else h % b or w % b):
        return False
    split, perm, joined = _block_move_nhwc(node.op, node.attrs.get("mode") == fb.DepthToSpaceMode.CRD, b, x.shape)
    source, out = t[0], graph.values[node.outputs[0]]
    for op, attrs in (("Reshape", split), ("Transpose", perm), ("Reshape", joined)):
        shape = [graph.add_const(np.array(attrs, np.int64), f"{node.name}/shape")] if op == "Reshape" else []
        moved = Node(op, graph.fresh(f"{node.name}/nhwc_{op.lower()}"), [source, *shape],
                     [graph.fresh(out.name + "_nhwc")], {"perm": list(perm)} if op == "Transpose" else {},
                     quant_type=node.quant_type, rounding=node.rounding)
        graph.values[moved.outputs[0]] = Value(moved.outputs[0], (), out.dtype, quant_params=list(out.quant_params))
        graph.nodes.insert(graph.nodes.index(node), moved)
        infer_node(graph, moved)
        source = moved.outputs[0]
    graph.values[source].format = fb.Format.NHWC
    node.op, node.inputs, node.attrs = "Transpose", [source], {"perm": [0, 3, 1, 2]}
    return True


def _merge_transposes(graph: Graph, node: Node) -> bool:
    t = _transpose_input(graph, node.inputs[0])
    perm = tuple(int(p) for p in node.attrs["perm"])
    if t is not None:
        node.inputs[0], node.attrs["perm"] = t[0], list(_compose(t[1], perm))
        return True
    if perm == tuple(range(len(perm))):
        return bypass(graph, node)
    return False


def _as_reshape(graph: Graph, node: Node, perm: Perm) -> bool:
    """A transpose that keeps the order of all dims other than 1s is a (copy-free) reshape. The target shape
    copies dims that stay in place (0) and infers the one moved dim (-1), so it survives a batch Resize."""
    x = graph.values[node.inputs[0]]
    if x.dynamic:           # its rank may be a guess: only a transpose knows how many dims it has
        return False
    moved = [p for p in perm if x.shape[p] != 1]
    if moved != sorted(moved):
        return False
    shape = [0 if p == i else 1 if x.shape[p] == 1 else -1 for i, p in enumerate(perm)]
    if shape.count(-1) > 1:
        return False
    node.op, node.attrs = "Reshape", {}
    node.inputs = [node.inputs[0], graph.add_const(np.array(shape, np.int64), node.name + "/shape")]
    return True


def _push_squeeze(graph: Graph, node: Node) -> bool:
    """Squeeze and Unsqueeze with constant axes, done on the untransposed input: its own size-1 dims dropped, or new
    ones inserted, and the perm renumbered (a Conv1D exported as Unsqueeze, Conv, Squeeze)."""
    t = _transpose_input(graph, node.inputs[0])
    axes = graph.const(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    if (t is None or axes is None or graph.values[t[0]].dynamic
            or any(len(graph.values[v].quant_params) > 1 for v in (t[0], *node.outputs))):
        return False
    source, perm = t
    rank = len(perm)
    if node.op == "Squeeze":
        gone = {int(a) % rank for a in axes.ravel()}
        dropped = sorted(perm[a] for a in gone)
        out_perm = tuple(p - sum(d < p for d in dropped) for j, p in enumerate(perm) if j not in gone)
        new_axes = dropped
    else:                           # each new dim goes before the input dim that follows it in the output
        out_rank = rank + axes.size
        added = sorted(int(a) % out_rank for a in axes.ravel())
        kept = iter(perm)
        tokens = [("new", j) if j in added else ("old", next(kept)) for j in range(out_rank)]
        order: list[tuple[str, int]] = [("old", a) for a in range(rank)]
        for j in added:
            after = next((t for t in tokens[j + 1:] if t[0] == "old"), None)
            order.insert(order.index(after) if after else len(order), ("new", j))
        out_perm = tuple(order.index(t) for t in tokens)
        new_axes = [order.index(("new", j)) for j in added]
    axes_name = graph.add_const(np.array(new_axes, np.int64), node.inputs[1] + "_nhwc")
    _rewrite(graph, node, [source, axes_name], dict(node.attrs), out_perm)
    return True


PUSH: dict[str, Callable[[Graph, Node], bool]] = {   # by layout kind
    ELEMENTWISE: _push_elementwise,
    AXIS: _push_axis_attr,
    AXES_INPUT: _push_axes_input,
    PER_AXIS: _push_per_axis_inputs,
}


def _push(graph: Graph, node: Node) -> bool:
    """Move the transposes before `node` past it (or merge them, for a Transpose); True when the graph changed."""
    if node.op == "Transpose":
        return _merge_transposes(graph, node)
    if node.op in ("Squeeze", "Unsqueeze"):
        return _push_squeeze(graph, node)
    if node.op in ("DepthToSpace", "SpaceToDepth"):
        return _push_block_move(graph, node)
    push = PUSH.get(traits(node.op).layout.kind)
    return push is not None and push(graph, node)


def to_nhwc(graph: Graph) -> None:
    changed = True
    while changed:
        changed = False
        graph.sort()
        for node in list(graph.nodes):
            if node in graph.nodes and _push(graph, node):
                changed = True
        graph.prune()
    for node in graph.op_nodes("Transpose"):    # what is left: free when only size-1 dims move
        _as_reshape(graph, node, tuple(int(p) for p in node.attrs["perm"]))
    graph.prune()
