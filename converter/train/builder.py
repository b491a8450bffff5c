"""Turn an inference graph into the training graph of `docs/training.md` by source transformation.

The forward nodes stay as they are (the `eval` subgraph). The training forward is a copy of the nodes the
predictions depend on, its values renamed `<value>/train`, with the ops that have a train-mode form
(`traits(op).train`: BatchNorm, Dropout, LayerNorm) in that form; then the
loss, the backward (one bprop rule per forward node, in reverse topological order, gradients of a value read by
several nodes summed with Add), and one optimizer node per trainable weight.

Frozen weights: a BatchNorm whose scale and bias are frozen runs in inference mode in the training forward too, so a
frozen backbone is truly frozen (its running statistics do not move) and nothing upstream needs a gradient. Only
values on a path from a trainable weight to the loss get gradients.
"""
from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from converter.ir import Graph, Node, SubGraph, Value
from converter.train.bprop import RULES, Bprop, differentiable
from converter.shape_inference import infer_node
from converter.train.config import TrainParams
from lite.status import NotSupportedError, ParamInvalidError
from lite.traits import TrainMode, traits
from schema import fb
from schema.train_format import (EVAL, GRAD_SUFFIX, GRADIENTS, LABELS, LEARNING_RATE, LOSS, OPTIMIZER,
                                 OPTIMIZER_INPUTS, OPTIMIZER_STATE, TRAIN_SUFFIX)

_LOSS_OPS = {"mse": "MSELoss", "bce_with_logits": "BinaryCrossEntropy", "smooth_l1": "SmoothL1Loss", "ctc": "CTCLoss"}
_CROSS_ENTROPY = {"sparse": "SparseSoftmaxCrossEntropyWithLogits", "onehot": "SoftmaxCrossEntropyWithLogits"}


@dataclass
class OptimizerStart:
    """Where the optimizer starts (a training run exported by another framework goes on): state tensors by their
    name `<weight>/<role>` (zeros otherwise), and weight decays of single weights (`TrainParams.weight_decay`
    otherwise)."""
    state: Mapping[str, np.ndarray] = field(default_factory=dict)
    weight_decay: Mapping[str, float] = field(default_factory=dict)


def build_training_graph(graph: Graph, params: TrainParams, weights: Sequence[str],
                         frozen: Collection[str] = (), resume: OptimizerStart | None = None) -> Graph:
    """Make `graph` (imported, folded, NHWC, without BatchNorm/activation fusion) a training graph in place and
    return it. `weights`: the source model's weight names (ONNX float initializers, in file order); `frozen`:
    weights never trained (besides those `params.freeze` matches); `resume`: where the optimizer starts."""
    prediction = _prediction(graph, params.output)
    graph.sort()
    forward = list(graph.nodes)
    weights = [w for w in weights if graph.const(w) is not None]
    trainable = _select(graph, forward, weights, frozen, params)
    _reserve(graph, [LABELS, LOSS, LEARNING_RATE, *(f"{w}{s}" for w in trainable
                                                    for s in (GRAD_SUFFIX, *(f"/{r}" for r in OPTIMIZER_STATE)))])

    start = len(graph.nodes)
    renamed = _train_forward(graph, _ancestors(forward, prediction), set(weights) - set(trainable))
    train_forward = graph.nodes[start:]
    dlogits = _loss(graph, params, renamed[prediction])
    grads = _backward(graph, train_forward, renamed[prediction], dlogits, trainable)
    gradient_nodes = graph.nodes[start:]

    start = len(graph.nodes)
    _optimizer(graph, params, grads, resume or OptimizerStart())
    graph.subgraphs = [
        SubGraph(EVAL, list(graph.inputs), list(graph.outputs), forward),
        SubGraph(GRADIENTS, [*graph.inputs, LABELS], [LOSS, renamed[prediction], *grads.values()],
                 gradient_nodes),
        SubGraph(OPTIMIZER, list(grads.values()), [], graph.nodes[start:]),
    ]
    graph.inputs.append(LABELS)
    graph.outputs = [LOSS, renamed[prediction]]
    return graph


# ---- which weights train -------------------------------------------------------------------------------------------
def _prediction(graph: Graph, output: str) -> str:
    if not output:
        return graph.outputs[0]
    if output not in graph.outputs:
        raise ParamInvalidError(f"train parameter 'output': '{output}' is not a model output "
                                f"(outputs: {', '.join(graph.outputs)})")
    return output


def _matching(patterns: Sequence[str], names: Sequence[str], key: str) -> set[str]:
    """The names some pattern matches in full; a pattern matching no name is a mistake worth an error."""
    found = set()
    for pattern in patterns:
        hits = {n for n in names if re.fullmatch(pattern, n)}
        if not hits:
            raise ParamInvalidError(f"train parameter '{key}': '{pattern}' matches no weight of the model")
        found |= hits
    return found


def _select(graph: Graph, forward: list[Node], weights: list[str], frozen: Collection[str],
            params: TrainParams) -> list[str]:
    """The weights to train, in `weights` order: read where a gradient can flow, picked by `trainable`, minus
    `freeze` and `frozen`."""
    read = {x for n in forward for i, x in enumerate(n.inputs) if differentiable(n.op, i)}
    candidates = [w for w in weights if w in read]
    picked = _matching(params.trainable, weights, "trainable") if params.trainable else set(candidates)
    excluded = _matching(params.freeze, weights, "freeze") | set(frozen)
    chosen = [w for w in candidates if w in picked and w not in excluded]
    if not chosen:
        raise ParamInvalidError("no weight is left to train: every weight is frozen or unmatched by 'trainable'")
    return chosen


def _reserve(graph: Graph, names: list[str]) -> None:
    taken = [n for n in names if n in graph.values]
    if taken:
        raise NotSupportedError(f"the model has tensors named {taken}, names the training graph reserves")


# ---- training forward ----------------------------------------------------------------------------------------------
def _ancestors(nodes: list[Node], output: str) -> list[Node]:
    """The nodes `output` depends on, in the order of `nodes` (topological)."""
    wanted, kept = {output}, []
    for node in reversed(nodes):
        if wanted.intersection(node.outputs):
            kept.append(node)
            wanted.update(node.inputs)
    return kept[::-1]


def _copy_value(graph: Graph, source: str, name: str) -> str:
    v = graph.values[source]
    graph.values[name] = Value(name, v.shape, v.dtype, format=v.format)
    return name


def _train_form(node: Node, frozen: set[str]) -> TrainMode | None:
    """The node's train-mode form (`traits(op).train`), unless the inputs that decide it are all frozen."""
    mode = traits(node.op).train
    if mode is None or mode.unless_frozen and frozen.issuperset(node.inputs[k] for k in mode.unless_frozen):
        return None
    return mode


def _train_forward(graph: Graph, nodes: list[Node], frozen: set[str]) -> dict[str, str]:
    """Append train-mode copies of `nodes`; returns eval value name -> train value name for their outputs.
    Saved tensors a train-mode node adds for its gradient get their shapes from the op's own shape rule."""
    renamed: dict[str, str] = {}
    for node in nodes:
        outputs = [_copy_value(graph, o, graph.fresh(o + TRAIN_SUFFIX)) for o in node.outputs]
        renamed.update(zip(node.outputs, outputs))
        inputs = [renamed.get(i, i) for i in node.inputs]
        copy = Node(node.op, graph.fresh(node.name + TRAIN_SUFFIX), inputs, outputs, dict(node.attrs))
        mode = _train_form(node, frozen)
        if mode is not None:
            if mode.flag:
                copy.attrs["training"] = True
            saved = [graph.fresh(f"{node.name}/{s}") for s in mode.outputs[len(outputs) - 1:]]
            if saved:
                copy.outputs = outputs + saved
                infer_node(graph, copy)
                for name in saved:      # a saved tensor shaped like the output shares its layout
                    same = graph.values[name].shape == graph.values[outputs[0]].shape
                    graph.values[name].format = graph.values[outputs[0]].format if same else fb.Format.ND
        graph.nodes.append(copy)
    return renamed


def _loss(graph: Graph, params: TrainParams, prediction: str) -> str:
    """Append the loss node reading `prediction` and the new input `labels`; returns d loss / d prediction."""
    pred = graph.values[prediction]
    if params.loss == "softmax_cross_entropy":
        if pred.rank != 2:
            raise NotSupportedError(f"softmax_cross_entropy needs predictions [N, classes], but '{prediction}' "
                                    f"has shape {list(pred.shape)}")
        op = _CROSS_ENTROPY[params.labels]
    else:
        op = _LOSS_OPS[params.loss]
    sparse = op == _CROSS_ENTROPY["sparse"]
    if op == "CTCLoss":
        if pred.rank != 3:
            raise NotSupportedError(f"ctc needs time-major predictions [T, N, classes], but '{prediction}' has "
                                    f"shape {list(pred.shape)}")
        graph.values[LABELS] = Value(LABELS, (pred.shape[1], params.label_length), np.dtype(np.int32))
    else:
        graph.values[LABELS] = Value(LABELS, pred.shape[:1] if sparse else pred.shape,
                                     np.dtype(np.int32) if sparse else pred.dtype)
    graph.values[LOSS] = Value(LOSS, (), np.dtype(np.float32))
    dlogits = _copy_value(graph, prediction, graph.fresh(prediction + "/grad"))
    attrs = {"beta": params.beta} if op == "SmoothL1Loss" else {"blank": params.blank} if op == "CTCLoss" else {}
    graph.nodes.append(Node(op, graph.fresh(op), [prediction, LABELS], [LOSS, dlogits], attrs))
    return dlogits


# ---- backward ------------------------------------------------------------------------------------------------------
def _needs_gradient(nodes: list[Node], graph: Graph, trainable: list[str]) -> set[str]:
    """Values computed from a trainable weight along differentiable inputs (the only ones worth a gradient)."""
    needs = set(trainable)
    for node in nodes:
        if any(x in needs and differentiable(node.op, i) for i, x in enumerate(node.inputs)):
            needs.update(o for o in node.outputs if np.issubdtype(graph.values[o].dtype, np.floating))
    return needs


def _sum(graph: Graph, value: str, parts: list[str], target: str | None = None) -> str:
    """The gradient of `value` from its contributions `parts` (an Add chain when several), written to `target`
    when given (a weight's `<w>/grad`)."""
    if target is None and len(parts) == 1 or parts == [target]:
        return parts[0]
    if target in parts:
        keep = graph.fresh(f"{target}/part")
        graph.rename_value(target, keep)
        parts = [keep if p == target else p for p in parts]
    total = parts[0]
    if len(parts) == 1:     # a weight's gradient that is another value's: copied under the weight's name
        graph.nodes.append(Node("Identity", graph.fresh(f"{target}/copy"), [total], [target]))
        _copy_value(graph, value, target)
        return target
    for k, part in enumerate(parts[1:], 2):
        out = target if k == len(parts) and target else graph.fresh(f"{value}/grad/sum")
        graph.nodes.append(Node("Add", graph.fresh(f"{value}/grad/accumulate"), [total, part], [out]))
        total = _copy_value(graph, value, out)
    return total


def _backward(graph: Graph, nodes: list[Node], prediction: str, dlogits: str,
              trainable: list[str]) -> dict[str, str]:
    """Append the gradient nodes of the train-forward `nodes`; returns weight -> its `<w>/grad` (weights whose
    gradient does not reach the loss are left out)."""
    needs = _needs_gradient(nodes, graph, trainable)
    parts: dict[str, list[str]] = {prediction: [dlogits]}
    for node in reversed(nodes):
        needed = [x in needs and differentiable(node.op, i) for i, x in enumerate(node.inputs)]
        if not any(needed) or parts.keys().isdisjoint(node.outputs):
            continue
        dys = [_sum(graph, o, parts[o]) if o in parts else None for o in node.outputs]
        prefix = node.name.removesuffix(TRAIN_SUFFIX)
        if node.op not in RULES:
            raise NotSupportedError(f"cannot train through op '{node.op}' at node '{prefix}': it has no gradient")
        if node.attrs.get("activation"):
            raise NotSupportedError(f"cannot train through node '{prefix}': a fused activation has no gradient")
        g = Bprop(graph, node, dys, needed, prefix)
        for x, grad, need in zip(node.inputs, RULES[node.op](g), needed):
            if need and grad:
                parts.setdefault(x, []).append(grad)
    return {w: _sum(graph, w, parts[w], w + GRAD_SUFFIX) for w in trainable if w in parts}


# ---- optimizer -----------------------------------------------------------------------------------------------------
def _state(graph: Graph, given: Mapping[str, np.ndarray], weight: str, name: str,
           shape: tuple[int, ...] | None = None, fill: float = 0.0) -> str:
    """A float32 state constant `<weight>/<name>`: its `given` value (a weight's shape: in the weight's source
    layout), else filled with `fill` (of the weight's shape unless `shape` is given)."""
    full, w = f"{weight}/{name}", graph.values[weight]
    like_weight, shape = shape is None, w.shape if shape is None else shape
    if full not in given:
        array = np.full(shape, fill, np.float32)
    else:
        array = np.asarray(given[full], np.float32)
        if like_weight and w.source_perm:
            array = array.transpose(np.argsort(w.source_perm))
        if array.shape != shape:
            raise NotSupportedError(f"optimizer state '{full}' has shape {list(array.shape)}, the optimizer needs "
                                    f"{list(shape)}")
        array = np.ascontiguousarray(array)
    graph.values[full] = Value(full, array.shape, array.dtype, array)
    return full


def _optimizer(graph: Graph, params: TrainParams, grads: dict[str, str], start: OptimizerStart) -> None:
    """One optimizer node per weight, all reading the scalar `learning_rate`; inputs in the order of
    `schema.train_format.OPTIMIZER_INPUTS`."""
    lr = np.array(params.learning_rate, np.float32)
    graph.values[LEARNING_RATE] = Value(LEARNING_RATE, (), lr.dtype, lr)
    for w, grad in grads.items():
        op, attrs, kinds = _update(params)
        given = {"weight": w, "grad": grad, "lr": LEARNING_RATE}
        if w in start.weight_decay:
            attrs["weight_decay"] = start.weight_decay[w]
        inputs = [given[r] if r in given else _state(graph, start.state, w, r, *kinds[r])
                  for r in OPTIMIZER_INPUTS[op]]
        graph.nodes.append(Node(op, graph.fresh(f"{w}/{op}"), inputs, [], attrs))


def _update(p: TrainParams) -> tuple[str, dict[str, Any], dict[str, tuple[tuple[int, ...] | None, float]]]:
    """The optimizer op, its attributes and its state tensors' (shape, fill): None is the weight's shape."""
    if p.optimizer == "sgd":
        return "Sgd", dict(momentum=p.momentum, dampening=p.dampening, weight_decay=p.weight_decay,
                           nesterov=p.nesterov), {"accum": (None, 0.0), "stat": ((), 1.0)}
    if p.optimizer == "momentum":
        return "ApplyMomentum", dict(momentum=p.momentum, use_nesterov=p.nesterov, weight_decay=p.weight_decay), {
            "accum": (None, 0.0)}
    return "Adam", dict(beta1=p.beta1, beta2=p.beta2, epsilon=p.epsilon, weight_decay=p.weight_decay), {
        "m": (None, 0.0), "v": (None, 0.0), "step": ((), 0.0)}
