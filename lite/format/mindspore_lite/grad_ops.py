"""The primitives of MindSpore Lite training files (`converter_lite --trainModel=true`) -> our training kernels.

The official converter keeps MindSpore's backward graph as it was exported: gradient primitives (ActivationGrad,
BiasAddGrad, the pooling and conv backprops), the loss twice (`is_grad` false gives the loss, true the gradient of
the logits) and one optimizer node per weight updating it in place. Each maps onto a kernel of
`lite/kernels/grad/`; where MindSpore's operand order or convention differs from ours the rule says how.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from lite.dtypes import DataType
from lite.format.mindspore_lite.ops import Graph, Node, register
from schema import fb as ours
from schema.mindspore_lite import fb

_A = fb.ActivationType
_OA = ours.ActivationType
# The converter keeps each MindSpore activation gradient's own operands (ActivationGrad's `activation_type` says
# which it was); ours reads (dy, x), x the forward input.
# - ReLU, ReLU6 (dy, y), y the forward output: a clip passes y through where it passes x, so ours serves as is;
_CLIPS = {_A.RELU, _A.RELU6}
# - HSwish, HSigmoid (dy, x) and GeLU (dy, x, y): ours, on the first two (GELU as the forward's Activation, which
#   the converter writes with `approximate` false);
_OF_INPUT = {_A.HSWISH: {"type": _OA.HSWISH}, _A.GELU: {"type": _OA.GELU},
             _A.HSIGMOID: {"type": _OA.HSIGMOID, "alpha": 1 / 6, "beta": 0.5}}   # relu6(x + 3) / 6
# - Sigmoid, Tanh (y, dy): their slope from y, dx = dy * y * (1 - y) and dy * (1 - y * y), as elementwise nodes.
_OF_OUTPUT = (_A.SIGMOID, _A.TANH)


def _window(node: Node, field: str) -> tuple[int, int]:
    """A kernel size or stride of 2 values (h, w), or MindSpore's 4 in NCHW order (1, 1, h, w)."""
    values = node.ints(field) or [1, 1]
    if len(values) == 4:
        values = values[2:]
    if len(values) != 2 or min(values) < 1:
        raise node.fail(f"{field} is {node.ints(field)}, expected (h, w) or (1, 1, h, w) of positive values")
    return values[0], values[1]


def _conv_attrs(node: Node, pads: str) -> dict:
    if node.attr("Format") != fb.Format.NHWC:
        raise node.refuse(f"data format {node.attr('Format')} is not supported (only NHWC)")
    if node.attr("ActivationType") != _A.NO_ACTIVATION:
        raise node.refuse("a fused activation is not supported on a conv gradient")
    mode = node.attr("PadMode")
    modes = {fb.PadMode.PAD: ours.PadMode.PAD, fb.PadMode.SAME: ours.PadMode.SAME_UPPER,
             fb.PadMode.VALID: ours.PadMode.VALID}
    if mode not in modes:
        raise node.fail(f"unknown pad mode {mode}")
    pad = node.ints(pads) or [0, 0, 0, 0]
    if len(pad) != 4 or min(pad) < 0:
        raise node.fail(f"{pads} is {pad}, expected 4 non-negative values (top, bottom, left, right)")
    kh, kw = _window(node, "KernelSize")
    sh, sw = _window(node, "Stride")
    dh, dw = _window(node, "Dilation")
    return dict(kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw,
                pad_mode=modes[mode], pad_top=pad[0], pad_bottom=pad[1], pad_left=pad[2], pad_right=pad[3],
                group=node.attr("Group") or 1)


def _filter_grad(graph: Graph, node: Node) -> None:
    """Conv2DBackpropFilterFusion (dy, x, filter shape) -> Conv2DGradFilter (dy, x): the OHWI gradient of the
    NHWC conv's weight, as the forward's weight is stored."""
    graph.add(node, "Conv2DGradFilter", _conv_attrs(node, "PadList"), node.inputs[:2])


def _input_grad(graph: Graph, node: Node) -> None:
    """Conv2DBackpropInputFusion (dy, weight, input shape) -> Conv2DGradInput (dy, weight, x), x a zero-stride
    placeholder of the forward input's NHWC shape (the kernel reads only its shape); the file states that shape
    in MindSpore's NCHW order."""
    n, c, h, w = (int(v) for v in graph.const(node, 2, "input shape"))
    x = graph.add_const(f"{node.name}/input_shape", np.broadcast_to(np.float32(0), (n, h, w, c)))
    graph.add(node, "Conv2DGradInput", _conv_attrs(node, "PadList"), [*node.inputs[:2], x])


def _pool_grad(mode: int) -> Callable[[Graph, Node], None]:
    def rule(graph: Graph, node: Node) -> None:
        """Max/AvgPoolGrad (x, y, dy) -> PoolingGrad (dy, x, y); NHWC, SAME or VALID padding."""
        if node.attr("Format") != fb.Format.NHWC:
            raise node.refuse(f"data format {node.attr('Format')} is not supported (only NHWC)")
        pad_mode = {fb.PadMode.SAME: ours.PadMode.SAME_UPPER, fb.PadMode.VALID: ours.PadMode.VALID}.get(
            node.attr("PadMode"))
        if pad_mode is None:
            raise node.refuse(f"pad mode {node.attr('PadMode')} is not supported (SAME or VALID)")
        kh, kw = _window(node, "KernelSize")
        sh, sw = _window(node, "Strides")
        x, y, dy = node.inputs
        graph.add(node, "PoolingGrad", dict(mode=mode, kernel_h=kh, kernel_w=kw, stride_h=sh, stride_w=sw,
                                            pad_mode=pad_mode, count_include_pad=False), [dy, x, y])
    return rule


def _activation_grad(graph: Graph, node: Node) -> None:
    """ActivationGrad of MindSpore's activation gradients -> ours, or its slope as elementwise nodes (see
    `_CLIPS`, `_OF_INPUT`, `_OF_OUTPUT`)."""
    kind = node.attr("ActivationType")
    if len(node.inputs) != (3 if kind == _A.GELU else 2):
        raise node.fail(f"has {len(node.inputs)} inputs, the gradient of activation type {kind} has "
                        f"{3 if kind == _A.GELU else 2}")
    if kind in _CLIPS:
        graph.add(node, "ActivationGrad", {"type": kind}, node.inputs[:2])
    elif kind in _OF_INPUT:
        graph.add(node, "ActivationGrad", _OF_INPUT[kind], node.inputs[:2])
    elif kind in _OF_OUTPUT:
        y, dy = node.inputs[:2]
        one = graph.add_const(f"{node.name}/one", np.array(1, np.float32))
        part = graph.add_tensor(f"{node.name}/part", DataType.FLOAT32)     # 1 - y, or y * y
        slope = graph.add_tensor(f"{node.name}/slope", DataType.FLOAT32)
        if kind == _A.SIGMOID:
            graph.add(node, "Sub", {}, [one, y], [part], "/one_minus_y")
            graph.add(node, "Mul", {}, [y, part], [slope], "/slope")
        else:
            graph.add(node, "Mul", {}, [y, y], [part], "/y_y")
            graph.add(node, "Sub", {}, [one, part], [slope], "/slope")
        graph.add(node, "Mul", {}, [dy, slope])
    else:
        raise node.refuse(f"the gradient of activation type {kind} is not supported (ReLU, ReLU6, Sigmoid, Tanh, "
                          f"HSwish, HSigmoid and GELU are)")


def _loss(op: str) -> Callable[[Graph, Node], None]:
    def rule(graph: Graph, node: Node) -> None:
        """The loss node (logits, labels): our kernel gives (loss, dlogits); an official node giving one of them
        (`is_grad` says which) has the other go to a fresh tensor."""
        if len(node.outputs) == 2:
            graph.add(node, op, {}, node.inputs)
            return
        grad = bool(node.attr("IsGrad")) if op == "SparseSoftmaxCrossEntropyWithLogits" else False
        spare = graph.add_tensor(f"{node.name}/{'loss' if grad else 'dlogits'}", DataType.FLOAT32)
        outputs = [spare, node.outputs[0]] if grad else [node.outputs[0], spare]
        graph.add(node, op, {}, node.inputs, outputs)
    return rule


def _momentum(graph: Graph, node: Node) -> None:
    """ApplyMomentum (weight, accum, lr, grad, momentum) -> ours (weight, accum, lr, grad), the momentum a const
    attribute; MindSpore's `gradient_scale` must be 1. The official node's output (a flag) is not made: ours
    update in place and give none."""
    if node.attr("GradientScale") != 1:
        raise node.refuse(f"gradient_scale {node.attr('GradientScale')} is not supported (only 1)")
    momentum = graph.const(node, 4, "momentum", integer=False)
    graph.add(node, "ApplyMomentum", dict(momentum=float(momentum.reshape(-1)[0]),
                                          use_nesterov=bool(node.attr("UseNesterov"))), node.inputs[:4], [])


def _sgd(graph: Graph, node: Node) -> None:
    """SGD (weight, grad, lr, accum, momentum, stat) -> our Sgd (weight, grad, lr, accum, stat). MindSpore keeps
    `stat` (1 until the first step) per element of the weight, all alike; ours is one scalar, made here."""
    momentum = graph.const(node, 4, "momentum", integer=False)
    stat = graph.const(node, 5, "stat", integer=False)
    if stat.size == 0 or not (stat == stat.flat[0]).all():
        raise node.fail("its stat input is empty or not one value throughout")
    flag = graph.add_const(f"{graph.tensors[node.inputs[5]].name}/flag", np.array(stat.flat[0], np.float32))
    graph.add(node, "Sgd", dict(momentum=float(momentum.reshape(-1)[0]), dampening=node.attr("Dampening"),
                                weight_decay=node.attr("WeightDecay"), nesterov=bool(node.attr("Nesterov"))),
              [*node.inputs[:4], flag], [])


def _adam(graph: Graph, node: Node) -> None:
    """Adam (weight, m, v, beta1^t, beta2^t, lr, beta1, beta2, epsilon, grad) -> ours (weight, m, v, step, lr,
    grad). MindSpore keeps the powers as graph tensors (the stored power times beta, assigned back after the
    step); ours counts the steps taken, in a step scalar of the node's own recovered from beta1^t. One difference
    remains: MindSpore adds epsilon to sqrt(v) before the bias correction, ours after it (torch's Adam)."""
    if node.attr("UseNesterov"):
        raise node.refuse("Nesterov Adam is not supported")
    beta1, beta2, epsilon = (float(graph.const(node, k, what, integer=False).reshape(-1)[0])
                             for k, what in ((6, "beta1"), (7, "beta2"), (8, "epsilon")))
    if not (0 < beta1 < 1 and 0 <= beta2 < 1 and epsilon >= 0):
        raise node.fail(f"beta1 {beta1}, beta2 {beta2} or epsilon {epsilon} is out of range")
    power = _this_steps_power(graph, node, 3)
    if not 0 < power < 1:
        raise node.fail(f"its beta1 power {power} is not in (0, 1)")
    step = round(math.log(power) / math.log(beta1))
    if step < 1 or not math.isclose(beta1 ** step, power, rel_tol=1e-4):
        raise node.fail(f"its beta1 power {power} is no power of beta1 {beta1}")
    taken = graph.add_const(f"{node.name}/step", np.array(step - 1, np.float32))
    w, m, v, _, _, lr, _, _, _, grad = node.inputs
    graph.add(node, "Adam", dict(beta1=beta1, beta2=beta2, epsilon=epsilon), [w, m, v, taken, lr, grad], [])


def _this_steps_power(graph: Graph, node: Node, position: int) -> float:
    """The value of input `position`: a const, or the product of the two consts a Mul node multiplies."""
    i = node.inputs[position]
    t = graph.tensors[i]
    if t.is_const and t.data.size == 1:
        return float(t.data.reshape(-1)[0])
    mul = next((nd for nd in graph.nodes if i in nd.outputs), None)
    if mul is None or mul.op != "Mul" or len(mul.inputs) != 2 or \
            not all(graph.tensors[k].is_const and graph.tensors[k].data.size == 1 for k in mul.inputs):
        raise node.refuse(f"its input {position} is neither a const nor a Mul of two consts")
    a, b = (float(graph.tensors[k].data.reshape(-1)[0]) for k in mul.inputs)
    return a * b


def _batch_norm(graph: Graph, node: Node) -> None:
    """FusedBatchNorm (x, scale, bias, mean, var), channels last. In training (`mode` 1) its outputs y, -, -,
    saved mean, saved inverse std map onto our train-mode BatchNorm's (y, saved_mean, saved_invstd); the running
    statistics, updated in place, follow MindSpore's `running = (1 - momentum) running + momentum batch`."""
    training = bool(node.attr("Mode"))
    if training and len(node.outputs) != 5:
        raise node.fail(f"has {len(node.outputs)} outputs, a training FusedBatchNorm has 5")
    outputs = [node.outputs[k] for k in (0, 3, 4)] if training else node.outputs[:1]
    graph.add(node, "BatchNorm", dict(epsilon=node.attr("Epsilon"), momentum=1 - node.attr("Momentum"), axis=-1,
                                      training=training), node.inputs, outputs)


def _batch_norm_grad(graph: Graph, node: Node) -> None:
    """BatchNormGrad (dy, x, scale, saved mean, saved inverse std, -) -> ours (its first five inputs), the
    statistics being those our BatchNorm saved."""
    graph.add(node, "BatchNormGrad", dict(epsilon=node.attr("Epsilon"), axis=-1), node.inputs[:5])


def _add_n(graph: Graph, node: Node) -> None:
    """AddN: a chain of Adds."""
    total = node.inputs[0]
    for k, term in enumerate(node.inputs[1:], 1):
        last = k == len(node.inputs) - 1
        out = node.outputs[0] if last else graph.add_tensor(f"{node.name}/sum{k}", graph.tensors[total].data_type)
        graph.add(node, "Add", {}, [total, term], [out], "" if last else f"/add{k}")
        total = out


for _op, _rule, _arity in (
        ("FusedBatchNorm", _batch_norm, (5, 5)),
        ("BatchNormGrad", _batch_norm_grad, (5, 6)),
        ("AddN", _add_n, (2, 1 << 16)),
        ("BiasAdd", lambda g, n: g.add(n, "Add", {}, n.inputs), (2, 2)),
        ("BiasAddGrad", lambda g, n: g.add(n, "BiasGrad", {}, n.inputs), (1, 1)),
        ("ActivationGrad", _activation_grad, (2, 3)),
        ("MaxPoolGrad", _pool_grad(ours.PoolMode.MAX), (3, 3)),
        ("AvgPoolGrad", _pool_grad(ours.PoolMode.AVG), (3, 3)),
        ("Conv2DBackpropFilterFusion", _filter_grad, (3, 3)),
        ("Conv2DBackpropInputFusion", _input_grad, (3, 3)),
        ("SparseSoftmaxCrossEntropyWithLogits", _loss("SparseSoftmaxCrossEntropyWithLogits"), (2, 2)),
        ("SoftmaxCrossEntropyWithLogits", _loss("SoftmaxCrossEntropyWithLogits"), (2, 2)),
        ("ApplyMomentum", _momentum, (5, 5)),
        ("Adam", _adam, (10, 10)),
        ("Assign", lambda g, n: g.add(n, "Assign", {}, n.inputs, []), (2, 2)),
        ("SGD", _sgd, (6, 6))):
    register(_op, _rule, _arity)
