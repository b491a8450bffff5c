"""The variables of a training model (docs/training.md) and their roles, read from its `optimizer` and
`gradients` subgraphs: trainable weights, their gradients, optimizer state, running statistics, the learning
rate."""
from __future__ import annotations

from dataclasses import dataclass

from lite.model import Model, NodeDef
from lite.status import GraphFileError, NotSupportedError
from lite.traits import traits
from schema.train_format import GRADIENTS, OPTIMIZER, OPTIMIZER_INPUTS


@dataclass
class TrainLayout:
    """Which tensors of a training model are variables, and their roles (tensor indices)."""
    weights: list[int]              # trainable weights, in optimizer order
    grads: dict[int, int]           # weight -> its `<w>/grad` tensor
    state: list[int]                # optimizer state (`<w>/accum`, `<w>/m`, ...)
    owner: dict[int, int]           # optimizer state -> its weight
    stats: list[int]                # BatchNorm running mean and variance
    learning_rate: int | None

    @property
    def variables(self) -> list[int]:
        lr = [self.learning_rate] if self.learning_rate is not None else []
        return list(dict.fromkeys([*self.weights, *self.state, *self.stats, *lr]))


def in_train_mode(node: NodeDef) -> bool:
    """True for a node running its op's train-mode form (`traits(op).train`)."""
    mode = traits(node.op).train
    return mode is not None and (not mode.flag or bool(getattr(node.attrs, "training", False)))


def draws_random(node: NodeDef) -> bool:
    """A train-mode node drawing random numbers (Dropout): the session seeds it per step."""
    return in_train_mode(node) and traits(node.op).train.random


def updated_state(node: NodeDef) -> tuple[tuple[int, str], ...]:
    """The (input, role) pairs a train-mode node updates in place (BatchNorm's running statistics)."""
    return traits(node.op).train.state_inputs if in_train_mode(node) else ()


def find_layout(model: Model) -> TrainLayout:
    """The variables of `model` from its `optimizer` and `gradients` subgraphs (empty for inference models)."""
    weights, grads, state, owner, stats, lr = [], {}, [], {}, [], None
    for node in model.subgraphs[OPTIMIZER].nodes if OPTIMIZER in model.subgraphs else ():
        if node.op not in OPTIMIZER_INPUTS:
            raise NotSupportedError(f"optimizer node '{node.name}' has op {node.op}; supported: "
                                    f"{', '.join(OPTIMIZER_INPUTS)}")
        if len(node.inputs) != len(OPTIMIZER_INPUTS[node.op]):
            raise GraphFileError(f"optimizer node '{node.name}' has {len(node.inputs)} inputs, not "
                                 f"{', '.join(OPTIMIZER_INPUTS[node.op])}")
        roles = dict(zip(OPTIMIZER_INPUTS[node.op], node.inputs))
        w = roles.pop("weight")
        weights.append(w)
        grads[w] = roles.pop("grad")
        lr = roles.pop("lr")
        for t in roles.values():
            if t >= 0:
                state.append(t)
                owner[t] = w
    for node in model.subgraphs[GRADIENTS].nodes if GRADIENTS in model.subgraphs else ():
        if any(k >= len(node.inputs) for k, _ in updated_state(node)):
            raise GraphFileError(f"{node.op} node '{node.name}' has {len(node.inputs)} inputs: too few to hold "
                                 f"its running statistics")
        stats += [node.inputs[k] for k, _ in updated_state(node)]
    layout = TrainLayout(weights, grads, state, owner, stats, lr)
    for t in layout.variables:
        if not model.tensors[t].is_const:
            raise GraphFileError(f"variable '{model.tensors[t].name}' must be stored in the model file")
    return layout
