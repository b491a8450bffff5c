"""MindSpore's exported training step, `TrainOneStepCell(WithLossCell(net, loss), optimizer)`, read as the
training it describes: the network, the loss, the optimizer with its hyper-parameters, and the optimizer's state.

Such a file is already differentiated (Conv2DBackpropFilter, ReluGrad, BatchNormGrad, ... and one ApplyMomentum or
Adam per weight). Its backward is not imported op by op: the network is cut out of it (the nodes its logits depend
on, as `mindspore.export` writes the network in inference mode), and our training graph is built from that network
with our own gradients, as `--trainModel=true` builds it from the inference export. What the file fixes becomes
the training parameters (`TrainingStep.settings`: loss, optimizer, learning rate, momentum, which weights train)
and the optimizer's accumulators its initial state (`TrainingStep.start`), so training resumes where MindSpore
left it. Anything the file does that this cannot reproduce (another loss, another optimizer, a learning-rate
schedule, per-group hyper-parameters other than weight decay, gradient scaling) is refused naming the primitive
and node.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.frontends.mindir.importer import ALIASES, Model, attributes
from converter.frontends.mindir.registry import Const
from converter.train.builder import OptimizerStart
from lite.status import NotSupportedError

SPARSE_LOSS = "SparseSoftmaxCrossEntropyWithLogits"
ARGUMENTS = {"ApplyMomentum": 5, "Adam": 10}  # the updates of nn.Momentum and nn.Adam, by their input count
MAPPED = tuple(ARGUMENTS)
# the primitives of MindSpore's optimizers (weight updates), and of its gradients
UPDATES = re.compile(r"Apply(Momentum|Ada.*|RMSProp|CenteredRMSProp|Ftrl|Proximal.*|PowerSign|AddSign|"
                     r"GradientDescent|KerasMomentum)|Fused.*(Momentum|Adam.*)|(Sparse)?Adam.*|SGD|Lamb|LARSUpdate")
GRADIENTS = re.compile(r".*Grad(V\d)?|.*Backprop(Filter|Input)")


@dataclass
class TrainingStep:
    forward: pb.ModelProto          # the network alone, as MindSpore exports it for inference
    settings: dict[str, Any]        # `converter.train.TrainParams` fields the file fixes
    start: OptimizerStart           # the optimizer's state, and the weight decays of weights decayed otherwise
    optimizer: str                  # "<primitive> at node '<name>'", for messages


def is_training_step(model: Model) -> bool:
    """Whether the file computes gradients or updates weights."""
    return any(GRADIENTS.fullmatch(p.op_type) or UPDATES.fullmatch(p.op_type) for p in model.proto.primitives)


def recognise(model: Model) -> TrainingStep:
    """The training `model` (`is_training_step`) describes; NotSupportedError naming what it cannot map."""
    env = model.initial_env()
    producers = {model.short(node.output[0] if node.output else node.name): (node, op, inputs)
                 for node, op, inputs in model.walk(model.graph, env)}
    updates = [entry for entry in producers.values() if UPDATES.fullmatch(entry[1])]
    if not updates:
        raise NotSupportedError(f"'{model.source}' computes gradients but updates no weight: only a training step "
                                f"(TrainOneStepCell) is supported")
    loss, labels = _loss(model, producers, env.get(model.graph.output[0].name) if model.graph.output else None)
    unmapped = next((e for e in updates if e[1] not in MAPPED), None)
    if unmapped:
        raise _refusal(model, unmapped, f"is an optimizer update that is not supported (supported: "
                                        f"{', '.join(MAPPED)}: nn.Momentum, nn.Adam)")
    reader = _Optimizer(model, producers)
    for entry in updates:
        reader.read(entry)
    return TrainingStep(_network(model, loss), dict(reader.settings(), labels=labels), reader.start(), reader.where)


def _refusal(model: Model, entry: tuple[pb.NodeProto, str, list], what: str) -> NotSupportedError:
    node, op, _ = entry
    return NotSupportedError(f"'{model.source}' is a training step whose {op} at node '{model.short(node.name)}' "
                             f"{what}")


def _loss(model: Model, producers: dict[str, tuple], output: Any) -> tuple[pb.NodeProto, str]:
    """(the node computing the step's loss from the logits (its input 0) and labels that are a graph input (input
    1), the kind of labels: `TrainParams.labels`)."""
    entry, kind = producers.get(output) if isinstance(output, str) else None, "sparse"
    if entry and entry[1] == "ReduceMean" and _batch_mean(entry[2]):
        whole = producers.get(entry[2][0][:-len("[0]")])   # the mean of item 0 of (loss per sample, gradient)
        if whole and whole[1] == "SoftmaxCrossEntropyWithLogits":
            entry, kind = whole, "onehot"
    if entry is None or not (kind == "onehot" or entry[1] == SPARSE_LOSS
                             and not attributes(model, entry[0]).get("is_grad", False)):
        what = f"'{entry[1]}' at node '{model.short(entry[0].name)}'" if entry else "not a computed tensor"
        raise NotSupportedError(f"'{model.source}' is a training step whose loss is {what}: only "
                                f"nn.SoftmaxCrossEntropyWithLogits(sparse=True|False, reduction='mean') is supported "
                                f"({SPARSE_LOSS}, or the batch mean of SoftmaxCrossEntropyWithLogits)")
    labels = entry[2][1] if len(entry[2]) > 1 else None
    if not isinstance(labels, str) or labels not in {model.short(i.name) for i in model.graph.input}:
        raise _refusal(model, entry, "reads labels that are not a graph input")
    return entry[0], kind


def _batch_mean(args: list) -> bool:
    """Whether ReduceMean's arguments take the mean of item 0 of a node over axis 0 (or all axes), dropping it."""
    x, axes, keep = (args + [None, None])[:3]
    return isinstance(x, str) and x.endswith("[0]") and isinstance(axes, Const) and \
        np.ravel(axes.value).tolist() in ([], [0]) and not (isinstance(keep, Const) and keep.value)


class _Optimizer:
    """The hyper-parameters and state of the optimizer nodes, checked to be one optimizer for every weight."""

    def __init__(self, model: Model, producers: dict[str, tuple]):
        self.model, self.producers = model, producers
        self.found: dict[str, Any] = {}
        self.trained: list[str] = []
        self.state: dict[str, np.ndarray] = {}
        self.decays: dict[str, float] = {}
        self.where = ""

    def read(self, entry: tuple[pb.NodeProto, str, list]) -> None:
        node, op, inputs = entry
        attrs = attributes(self.model, node)
        self.where = self.where or f"{op} at node '{self.model.short(node.name)}'"
        if len(inputs) < ARGUMENTS[op]:
            raise _refusal(self.model, entry, f"has {len(inputs)} inputs, not {ARGUMENTS[op]}")
        weight = inputs[0]
        self.parameter(entry, weight, "weight")
        if op == "ApplyMomentum":
            accum, lr, grad, momentum = inputs[1:5]
            if float(attrs.get("gradient_scale", 1.0)) != 1.0:
                raise _refusal(self.model, entry, f"scales gradients by {attrs['gradient_scale']}, which is not "
                                                  f"supported")
            found = dict(optimizer="momentum", learning_rate=self.scalar(entry, lr, "learning rate"),
                         momentum=self.scalar(entry, momentum, "momentum"),
                         nesterov=bool(attrs.get("use_nesterov", False)))
            self.state[f"{weight}/accum"] = self.parameter(entry, accum, "accumulation")
        else:
            m, v, beta1_power, _, lr, beta1, beta2, eps, grad = inputs[1:10]
            if attrs.get("use_nesterov", False):
                raise _refusal(self.model, entry, "uses Nesterov's update, which is not supported")
            found = dict(optimizer="adam", learning_rate=self.scalar(entry, lr, "learning rate"),
                         beta1=self.scalar(entry, beta1, "beta1"), beta2=self.scalar(entry, beta2, "beta2"),
                         epsilon=self.scalar(entry, eps, "epsilon"))
            self.state[f"{weight}/m"] = self.parameter(entry, m, "first moment")
            self.state[f"{weight}/v"] = self.parameter(entry, v, "second moment")
            self.state[f"{weight}/step"] = np.array(self.steps(entry, beta1_power, found["beta1"]), np.float32)
        self.decays[weight] = self.weight_decay(entry, weight, grad)
        if self.decays[weight] and op == "Adam":
            raise _refusal(self.model, entry, "adds weight decay to the gradient (nn.Adam's), which is not "
                                              "supported: ours is AdamW's, decoupled")
        for key, value in found.items():
            if self.found.setdefault(key, value) != value:
                raise _refusal(self.model, entry, f"has {key} {value} where another update has "
                                                  f"{self.found[key]}: one setting for every weight is supported")
        self.trained.append(weight)

    def common_decay(self) -> float:
        """The weight decay most weights have (MindSpore decays no BatchNorm gamma or beta by default)."""
        values = list(self.decays.values())
        return max(values, key=values.count)

    def settings(self) -> dict[str, Any]:
        return dict(self.found, loss="softmax_cross_entropy", weight_decay=self.common_decay(),
                    trainable=tuple(re.escape(w) for w in self.trained))

    def start(self) -> OptimizerStart:
        common = self.common_decay()
        return OptimizerStart(self.state, {w: d for w, d in self.decays.items() if d != common})

    def value(self, arg: Any) -> np.ndarray | None:
        """A constant's or a parameter's value; None for a computed one."""
        if isinstance(arg, Const):
            return np.asarray(arg.value)
        return self.model.parameters.get(arg) if isinstance(arg, str) else None

    def scalar(self, entry: tuple, arg: Any, what: str) -> float:
        """A hyper-parameter held as a constant or a parameter (printed as float32 prints it: 0.01)."""
        value = self.value(arg)
        if value is None or value.size != 1 or value.dtype.kind not in "biuf":
            source = self.producers.get(arg) if isinstance(arg, str) else None
            how = f"computed by {source[1]} at node '{self.model.short(source[0].name)}'" if source else "not a scalar"
            raise _refusal(self.model, entry, f"reads a {what} {how} (a schedule?): only a fixed value is supported")
        return float(str(np.float32(value.item())))

    def parameter(self, entry: tuple, arg: Any, what: str) -> np.ndarray:
        if not isinstance(arg, str) or arg not in self.model.parameters:
            raise _refusal(self.model, entry, f"updates a {what} that is not a parameter of the graph")
        return self.model.parameters[arg]

    def steps(self, entry: tuple, power: Any, beta1: float) -> float:
        """The steps taken before the export, from the beta1 power the step multiplies by beta1 first."""
        source = self.producers.get(power) if isinstance(power, str) else None
        if not 0 < beta1 < 1:
            raise _refusal(self.model, entry, f"has beta1 {beta1}, which is not in (0, 1)")
        if source is None or source[1] != "Mul":
            raise _refusal(self.model, entry, "reads a beta1 power that is not the parameter times beta1")
        held = next((self.value(a) for a in source[2] if isinstance(a, str) and a in self.model.parameters),
                    None)
        if held is None or held.size != 1 or not 0 < held.item() <= 1:
            raise _refusal(self.model, entry, "reads a beta1 power that is not the parameter times beta1")
        return float(round(math.log(held.item()) / math.log(beta1)))

    def weight_decay(self, entry: tuple, weight: str, grad: Any) -> float:
        """nn.Momentum's weight decay: the gradient plus weight times the decay, AddN((Mul(weight, decay), grad))."""
        source = self.producers.get(grad) if isinstance(grad, str) else None
        if source is None or source[1] not in ("AddN", "Add"):
            return 0.0
        terms = source[2][0] if source[1] == "AddN" else source[2]
        for term in terms if isinstance(terms, list) else []:
            mul = self.producers.get(term) if isinstance(term, str) else None
            if mul and mul[1] == "Mul" and weight in mul[2]:
                decay = next((a for a in mul[2] if a != weight), None)
                return self.scalar(entry, decay, "weight decay")
        return 0.0


def _is_token(node: pb.NodeProto) -> bool:
    return any(a.name == "value" and a.type == pb.AttributeProto.UMONAD for a in node.attribute)


def _network(model: Model, loss: pb.NodeProto) -> pb.ModelProto:
    """The model reduced to the nodes the loss's logits depend on, the logits its output, BatchNorm in inference
    mode, and the ordering tokens of the nodes left out replaced by the initial one: the network as
    `mindspore.export` writes it for inference."""
    produced = {n.output[0]: n for n in model.graph.node if n.output}
    start = next((name for name, n in produced.items() if model.primitive(n) == "Constant" and _is_token(n)), "")
    logits = loss.input[0]
    wanted, kept = [logits], set()
    while wanted:
        name = wanted.pop()
        node = produced.get(name)
        if node is None or name in kept or model.primitive(node) == "UpdateState":
            continue
        kept.add(name)
        wanted.extend(node.input[:1] if model.primitive(node) in ALIASES else node.input)
    forward = pb.ModelProto()
    forward.CopyFrom(model.proto)
    g = forward.graph
    del g.node[:]
    false = "is_training:false"
    g.node.add(op_type="Constant", name=false, output=[false]).attribute.add(name="value", i=0,
                                                                             type=pb.AttributeProto.BOOL)
    for node in model.graph.node:
        if not node.output or node.output[0] not in kept and model.primitive(node) != "Constant":
            continue
        copy = g.node.add()
        copy.CopyFrom(node)
        for k, name in enumerate(copy.input):
            if name in produced and name not in kept:       # a token of a node left out: the first orders alike
                copy.input[k] = start
        if model.primitive(node) == "BatchNorm" and len(copy.input) > 5:
            copy.input[5] = false
    for prim in forward.primitives:
        for attr in prim.attribute if prim.op_type == "BatchNorm" else ():
            if attr.name == "is_training":
                attr.i = 0
    used = {i for n in g.node for i in n.input}
    for field in (g.input, g.parameter):
        keep = [v for v in field if v.name in used]
        del field[:]
        field.extend(keep)
    del g.output[:]
    g.output.add(name=logits)
    return forward
