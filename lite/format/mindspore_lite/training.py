"""Training files of MindSpore Lite (`converter_lite --fmk=MINDIR --trainModel=true`) as our training contract.

The official file is one flat graph: MindSpore's forward, its loss, the backward it derived and one optimizer node
per weight, the weights and optimizer state as consts the optimizer updates. `TrainSession` (docs/training.md)
runs three subgraphs over one tensor table, so the translated nodes are split by what they feed:
- `eval`: the nodes the loss's logits need (the predictions of MindSpore Lite's Eval mode);
- `gradients`: the nodes the loss and every optimizer's gradient input need (forward, loss, backward);
- `optimizer`: the optimizer nodes.
The file's backward itself runs, op by op, on the kernels of `lite/kernels/grad/` (`grad_ops`): nothing of the
converter is needed, and the steps are MindSpore's own. The loss tensor is named `loss`, the labels input
`labels`, as in our own training files, so the training loop and its callbacks find them.
"""
from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np

from lite.format.fields import int_vector
from lite.format.graph import Part
from lite.format.mindspore_lite import grad_ops  # noqa: F401  (registers the training primitives)
from lite.format.mindspore_lite.ops import primitive_name
from lite.model import NodeDef, TensorDef
from lite.status import GraphFileError, NotSupportedError
from schema.train_format import EVAL, GRADIENTS, LABELS, LOSS, OPTIMIZER, OPTIMIZER_INPUTS, TRAIN_SUFFIX

# official optimizer primitive -> the inputs it updates in place (the weight and its state)
_UPDATED = {"ApplyMomentum": (0, 1), "SGD": (0, 3), "Adam": (0, 1, 2)}
_LOSSES = ("SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits")


def updated_tensors(root: Any) -> set[int]:
    """The tensors the optimizer nodes of an MSL2 `MetaGraph` update (weights and their state): empty for an
    inference file. Malformed nodes are left to the reader's checks."""
    updated: set[int] = set()
    for k in range(root.NodesLength()):
        primitive = root.Nodes(k).Primitive()
        code = primitive.ValueType() if primitive is not None else 0
        positions = _UPDATED.get(primitive_name(code)) if code else None
        if positions:
            inputs = int_vector(root.Nodes(k), "InputIndex")
            updated.update(inputs[p] for p in positions if p < len(inputs))
    return updated


def is_training(nodes: list[NodeDef]) -> bool:
    """True for translated nodes holding an optimizer (a `--trainModel=true` file)."""
    return any(nd.op in OPTIMIZER_INPUTS for nd in nodes)


def training_parts(tensors: list[TensorDef], nodes: list[NodeDef], inputs: list[int], outputs: list[int]) \
        -> list[Part]:
    """The `eval`, `gradients` and `optimizer` parts of a translated training file (node indices into `nodes`);
    renames its loss and labels tensors and lays optimizer state out as its weight (`_state_layout`)."""
    loss_node = next((nd for nd in nodes if nd.op in _LOSSES and nd.outputs[0] in outputs), None)
    if loss_node is None:
        raise NotSupportedError(f"the training file has optimizer nodes but no graph output is the loss of a "
                                f"{' or '.join(_LOSSES)} node")
    loss, (logits, labels) = loss_node.outputs[0], loss_node.inputs[:2]
    if labels not in inputs:
        raise NotSupportedError(f"the loss node '{loss_node.name}' compares with a computed tensor, not a graph "
                                f"input of labels")
    _rename(tensors, loss, LOSS)
    _rename(tensors, labels, LABELS)
    optimizers = [k for k, nd in enumerate(nodes) if nd.op in OPTIMIZER_INPUTS]
    grads = []
    for k in optimizers:
        roles = dict(zip(OPTIMIZER_INPUTS[nodes[k].op], nodes[k].inputs))
        grads.append(roles["grad"])
        for role, t in roles.items():
            if role not in ("weight", "grad", "lr"):
                _state_layout(tensors, t, roles["weight"])
    producer = {t: k for k, nd in enumerate(nodes) for t in nd.outputs}
    forward = _needed(nodes, producer, [logits])
    read = {t for k in forward for t in nodes[k].inputs}
    for k in optimizers:
        if nodes[k].inputs[0] not in read:     # e.g. a PReLU slope or Scale the translation reshaped into a copy
            raise NotSupportedError(f"optimizer node '{nodes[k].name}': the forward does not read its weight "
                                    f"'{tensors[nodes[k].inputs[0]].name}' as stored, so its updates would be lost")
    predictions = _train_forward(tensors, nodes, forward)[logits]
    producer = {t: k for k, nd in enumerate(nodes) for t in nd.outputs}
    data = [i for i in inputs if i != labels]
    return [Part(EVAL, data, [logits], forward),
            Part(GRADIENTS, inputs, [loss, predictions, *grads], _needed(nodes, producer, [loss, *grads])),
            Part(OPTIMIZER, [], [], optimizers)]


def _train_forward(tensors: list[TensorDef], nodes: list[NodeDef], forward: list[int]) -> dict[int, int]:
    """Give the `gradients` part a forward of its own (tensor -> its train copy): the file's forward nodes,
    copied with `/train` outputs, take the file's train-mode ops, and the originals become the inference forward
    of `eval` (BatchNorm on its running statistics, keeping only y). The backward reads the copies."""
    copies: dict[int, int] = {}
    for k in forward:
        nd = nodes[k]
        outputs = []
        for t in nd.outputs:
            copies[t] = len(tensors)
            tensors.append(replace(tensors[t], index=len(tensors), name=tensors[t].name + TRAIN_SUFFIX))
            outputs.append(copies[t])
        nodes.append(replace(nd, name=nd.name + TRAIN_SUFFIX, attrs=copy.copy(nd.attrs),
                             inputs=[copies.get(t, t) for t in nd.inputs], outputs=outputs))
        if nd.op == "BatchNorm" and nd.attrs.training:
            nd.attrs.training, nd.outputs = False, nd.outputs[:1]
    forward_set = set(forward)
    for k in range(len(nodes) - len(forward)):
        if k not in forward_set:
            nodes[k].inputs = [copies.get(t, t) for t in nodes[k].inputs]
    return copies


def _rename(tensors: list[TensorDef], index: int, name: str) -> None:
    clash = next((t for t in tensors if t.name == name and t.index != index), None)
    if clash is not None:
        raise GraphFileError(f"the training file already has a tensor named '{name}' (tensor {clash.index})")
    tensors[index] = replace(tensors[index], name=name)


def _state_layout(tensors: list[TensorDef], state: int, weight: int) -> None:
    """Optimizer state in the weight's layout. The official converter stores a conv weight as KHWC ([O, KH, KW,
    I]) but leaves its state as MindSpore made it, [O, I, KH, KW] (whatever format the file states): such state
    is transposed to the weight's layout. Other shapes are the optimizer kernel's to check."""
    s, w = tensors[state], tensors[weight]
    if len(w.dims) == 4 and s.dims == (w.dims[0], w.dims[3], w.dims[1], w.dims[2]) and s.data is not None:
        tensors[state] = replace(s, dims=w.dims, data=np.ascontiguousarray(s.data.transpose(0, 2, 3, 1)))


def _needed(nodes: list[NodeDef], producer: dict[int, int], targets: list[int]) -> list[int]:
    """Indices of the nodes `targets` depend on, each after the nodes it reads (iterative: deep graphs)."""
    order: list[int] = []
    state: dict[int, int] = {}      # 1: its inputs pending, 2: placed
    for root in (producer[t] for t in targets if t in producer):
        stack = [root]
        while stack:
            k = stack[-1]
            if state.get(k) == 2:
                stack.pop()
                continue
            pending = [producer[t] for t in nodes[k].inputs if t in producer and state.get(producer[t]) != 2]
            if state.get(k) == 1 or not pending:
                state[k] = 2
                order.append(k)
                stack.pop()
            else:
                state[k] = 1
                stack += pending
    return order
