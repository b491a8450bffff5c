"""A session's variables: the tensors a graph's Assign nodes write in place (an imported TFLite model's resource
variables, a streaming model's state), kept by the session across runs.

A variable's constant data is its initial value (what `ResetVariables` returns to). A checkpoint of a session
(`LiteSession.SaveToFile`, `TrainSession.SaveToFile`) stores each variable's current value beside it as a
constant named `<variable>` + `STATE_SUFFIX`, read by no node: a session loading the file starts from the saved
values and still resets to the initial ones.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Iterable

import numpy as np

from lite.format import mspy
from lite.model import Model, NodeDef, SubGraphDef, TensorDef
from schema import fb

STATE_SUFFIX = "/saved_state"


def written(model: Model, graphs: Iterable[Model | SubGraphDef]) -> list[int]:
    """The constant tensors that the Assign nodes of `graphs` write, in order of first write."""
    found = dict.fromkeys(node.inputs[0] for graph in graphs for node in graph.nodes
                          if node.op == "Assign" and model.tensors[node.inputs[0]].data is not None)
    return list(found)


def start_values(model: Model, variables: Iterable[int]) -> dict[int, np.ndarray]:
    """Writable arrays for `variables`: the state a checkpoint saved, else the initial value."""
    saved = {t.name: t for t in model.tensors if t.is_const and t.name.endswith(STATE_SUFFIX)}
    values = {}
    for i in variables:
        initial = model.tensors[i]
        state = saved.get(initial.name + STATE_SUFFIX)
        fits = state is not None and state.dims == initial.dims and state.data_type == initial.data_type
        values[i] = np.array(state.data if fits else initial.data).reshape(initial.data.shape)
    return values


def with_state(tensors: list[TensorDef], state: dict[int, np.ndarray]) -> list[TensorDef]:
    """`tensors` with each variable's current value in `state` stored as its saved-state constant (replacing
    one stored before)."""
    tensors = list(tensors)
    by_name = {t.name: t.index for t in tensors}
    for i, value in state.items():
        name = tensors[i].name + STATE_SUFFIX
        data = np.array(value)
        if name in by_name:
            tensors[by_name[name]] = replace(tensors[by_name[name]], data=data)
        else:
            tensors.append(replace(tensors[i], index=len(tensors), name=name, node_type=fb.NodeType.VALUE,
                                   data=data, dim_names=()))
    return tensors


def model_bytes(model: Model, tensors: list[TensorDef]) -> bytes:
    """`model` as `.ms` bytes of our format over `tensors` (its tensor table, changed), control-flow bodies
    included after its named subgraphs, as the converter writes them."""
    nodes: list[NodeDef] = [*model.nodes, *(n for body in model.bodies for n in body.nodes)]
    return mspy.write(model.name, tensors, nodes, model.inputs, model.outputs,
                      [*model.subgraphs.values(), *model.bodies], model.fmk_type)
