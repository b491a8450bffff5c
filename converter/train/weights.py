"""Source weights of a training graph: restore the source model's weight names on re-laid-out constants, and
find the weights a `freeze_until` node freezes. The weights and the nodes reading them come from the frontend
(`converter.frontends.SourceModel`), so this holds for every source framework.

The importer may store a weight in another layout under a new name (an ONNX Conv weight OIHW -> OHWI as
`<node>:Transpose:0`, a Gemm weight as `<node>/weight`, a per-channel constant reshaped by to_nhwc as
`<name>_nhwc`). A training model must report and train weights under their source names and layout, so every
constant that equals a transpose of a source weight gets the weight's name back, with `Value.source_perm`
the permutation to the source layout, and one that is a reshape of it is computed from it by a Reshape node (a
weight has one shape, and `source_perm` cannot change a rank). Constants already carrying a weight's name
(and their `source_perm`, when the importer keeps names itself) are left as they are.
"""
from __future__ import annotations

import itertools

import numpy as np

from converter.frontends import SourceModel
from converter.ir import Graph, Node, Value
from lite.status import ParamInvalidError


def _perm_to(source: np.ndarray, stored: np.ndarray) -> tuple[int, ...] | None:
    """The permutation p with source.transpose(p) == stored, or None (identity preferred)."""
    if source.dtype != stored.dtype or source.ndim != stored.ndim or source.size != stored.size:
        return None
    for perm in itertools.permutations(range(source.ndim)):
        if tuple(source.shape[p] for p in perm) == stored.shape and np.array_equal(source.transpose(perm), stored):
            return perm
    return None


def _owner(const_name: str, nodes: list[str]) -> str | None:
    """The source node whose importer created `const_name` (names are `<node>/...` or `<node>:...`)."""
    owners = [n for n in nodes if const_name.startswith((n + "/", n + ":"))]
    return max(owners, key=len, default=None)


def _layout(source: np.ndarray, stored: np.ndarray) -> tuple[str, tuple[int, ...]] | None:
    """How `stored` derives from source weight `source`: ("transpose", p) when stored == source.transpose(p),
    ("reshape", ()) when only the shape differs (to_nhwc's per-channel constants), else None."""
    if source.dtype != stored.dtype or source.size != stored.size:
        return None
    perm = _perm_to(source, stored)
    if perm is not None:
        return "transpose", perm
    return ("reshape", ()) if np.array_equal(source.ravel(), stored.ravel()) else None


def restore_source_names(graph: Graph, model: SourceModel) -> None:
    """Give every constant derived from a float source weight the weight's name back: a transposed copy is
    renamed, with `source_perm`; a reshaped copy becomes a Reshape node of the weight (kept in its source
    shape). A second copy of a weight already restored (a weight read by several nodes) is merged into it.
    The weights of the node that created the constant are tried first, then (for non-scalars) all weights; an
    ambiguous match (several equal weights) keeps the constant as it is."""
    inits = model.float_weights()
    readers = model.weight_readers()
    names = [name for name, _ in readers]
    inputs_of = dict(readers)
    read = {i for n in graph.nodes for i in n.inputs}
    for name in [k for k, v in graph.values.items() if v.const is not None and k in read and k not in inits]:
        stored = graph.values[name].const
        for candidates in (inputs_of.get(_owner(name, names), []), list(inits) if stored.size > 1 else []):
            matches = [(c, layout) for c in candidates if (layout := _layout(inits[c], stored)) is not None
                       and _usable(graph.values.get(c), inits[c] if layout[0] == "reshape" else stored)]
            if len(matches) == 1:
                source, (kind, perm) = matches[0]
                if kind == "reshape":
                    _reshaped_from(graph, name, source, inits[source])
                else:
                    _transposed_from(graph, name, source, perm)
            if matches:
                break


def _usable(existing: Value | None, needed: np.ndarray) -> bool:
    """Whether the weight's name is free, or already holds exactly the array the restored value needs."""
    return existing is None or existing.const is not None and np.array_equal(existing.const, needed)


def _transposed_from(graph: Graph, name: str, source: str, perm: tuple[int, ...]) -> None:
    if source in graph.values:
        graph.replace_uses(name, source)
        del graph.values[name]
        return
    graph.rename_value(name, source)
    identity = perm == tuple(range(len(perm)))
    graph.values[source].source_perm = () if identity else tuple(int(i) for i in np.argsort(perm))


def _reshaped_from(graph: Graph, name: str, source: str, array: np.ndarray) -> None:
    graph.values.setdefault(source, Value(source, array.shape, array.dtype, np.ascontiguousarray(array)))
    old = graph.values[name]
    graph.values[name] = Value(name, old.shape, old.dtype, format=old.format)
    shape = graph.add_const(np.array(old.shape, np.int64), f"{name}/shape")
    graph.nodes.insert(0, Node("Reshape", graph.fresh(f"{name}/from_source"), [source, shape], [name]))


def weights_up_to(model: SourceModel, node_name: str) -> set[str]:
    """Float weights read by source node `node_name` or by any node before it in the file's (topological)
    order; ParamInvalidError when no node has that name."""
    readers = model.weight_readers()
    names = [name for name, _ in readers]
    if node_name not in names:
        raise ParamInvalidError(f"train parameter 'freeze_until': the model has no node '{node_name}'")
    return {w for _, weights in readers[:names.index(node_name) + 1] for w in weights}
