"""bprop rules of the neural-network ops: convolution, dense layers, normalisation, pooling, softmax, dropout,
activations. Inputs are named as in the forward op's schema comment (x NHWC, weight OHWI, ...)."""
from __future__ import annotations

import numpy as np

from converter.train.bprop.rule import Bprop, Grads, bprop
from converter.train.bprop.shape import _zeros_like
from lite.status import NotSupportedError


@bprop("Conv2D")
def conv2d(g: Bprop) -> Grads:
    """x, weight, bias? -> dx = Conv2DGradInput(dy, w, x), dw = Conv2DGradFilter(dy, x), db = BiasGrad(dy)."""
    x, w = g.node.inputs[:2]
    return [g.grad("Conv2DGradInput", [g.dy, w, x], 0), g.grad("Conv2DGradFilter", [g.dy, x], 1),
            g.grad("BiasGrad", [g.dy], 2)]


@bprop("FullConnection")
def full_connection(g: Bprop) -> Grads:
    """x [..., in], weight [out, in], bias? [out] -> dx, dweight, dbias in one FullConnectionGrad."""
    x, w = g.node.inputs[:2]
    return g.grads("FullConnectionGrad", [g.dy, x, w], range(len(g.node.inputs)))


@bprop("MatMul")
def matmul(g: Bprop) -> Grads:
    return g.grads("MatMulGrad", [g.dy, *g.node.inputs], [0, 1])


@bprop("BatchNorm", wrt=(0, 1, 2))
def batch_norm(g: Bprop) -> Grads:
    """Training mode: BatchNormGrad(dy, x, scale, saved_mean, saved_invstd) -> dx, dscale, dbias. Inference
    mode (a frozen layer): dx = dy * scale / sqrt(var + eps), its parameters get no gradient."""
    x, scale, _, _, var = g.node.inputs
    if g.node.attrs.get("training"):
        _, saved_mean, saved_invstd = g.node.outputs
        return g.grads("BatchNormGrad", [g.dy, x, scale, saved_mean, saved_invstd], [0, 1, 2])
    if g.needs(1) or g.needs(2):
        raise NotSupportedError(f"BatchNorm node '{g.prefix}' runs in inference mode: its scale and bias "
                                "cannot be trained")
    return [_scaled_by(g, _inference_factor(g, scale, var))]


def _inference_factor(g: Bprop, scale: str, var: str) -> str:
    """scale / sqrt(var + eps), shaped to broadcast along the channel axis of x."""
    eps = g.graph.add_const(np.array(g.node.attrs.get("epsilon", 1e-5), np.float32), f"{g.prefix}/epsilon")
    std = g.emit("Sqrt", g.emit("Add", [var, eps], [var]), [var])
    factor = g.emit("Div", [scale, *std], [scale])[0]
    rank = g.value(g.node.inputs[0]).rank
    axis = g.node.attrs.get("axis", 1) % rank
    if axis == rank - 1:
        return factor
    shape = np.array([-1] + [1] * (rank - 1 - axis), np.int64)
    return g.emit("Reshape", [factor, g.graph.add_const(shape, f"{g.prefix}/channel_shape")], [scale])[0]


def _scaled_by(g: Bprop, factor: str) -> str:
    x = g.node.inputs[0]
    return g.emit("Mul", [g.dy, factor], [x], [f"{x}/grad"])[0]


@bprop("GroupNorm")
def group_norm(g: Bprop) -> Grads:
    """x, scale, bias -> GroupNormGrad(dy, x, scale, mean, invstd) -> dx, dscale, dbias (the training forward
    outputs its mean and invstd)."""
    x, scale = g.node.inputs[:2]
    _, mean, invstd = g.node.outputs
    return g.grads("GroupNormGrad", [g.dy, x, scale, mean, invstd], range(3))


@bprop("Pooling")
def pooling(g: Bprop) -> Grads:
    return [g.grad("PoolingGrad", [g.dy, g.node.inputs[0], g.node.outputs[0]], 0)]


@bprop("LRN")
def lrn(g: Bprop) -> Grads:
    return [g.grad("LRNGrad", [g.dy, g.node.inputs[0], g.node.outputs[0]], 0)]


@bprop("LayerNorm")
def layer_norm(g: Bprop) -> Grads:
    """x, scale, bias? -> LayerNormGrad(dy, x, scale, mean, invstd) -> dx, dscale, dbias (the training forward
    outputs its mean and invstd)."""
    x, scale = g.node.inputs[:2]
    _, mean, invstd = g.node.outputs
    return g.grads("LayerNormGrad", [g.dy, x, scale, mean, invstd], range(len(g.node.inputs)))


@bprop("Softmax")
def softmax(g: Bprop) -> Grads:
    return [g.grad("SoftmaxGrad", [g.dy, g.node.outputs[0]], 0)]


@bprop("LogSoftmax")
def log_softmax(g: Bprop) -> Grads:
    return [g.grad("LogSoftmaxGrad", [g.dy, g.node.outputs[0]], 0)]


@bprop("PReLU")
def prelu(g: Bprop) -> Grads:
    return g.grads("PReLUGrad", [g.dy, *g.node.inputs], [0, 1])


@bprop("Hardmax")
def hardmax(g: Bprop) -> Grads:
    """A one-hot of the argmax is piecewise constant: its gradient is zero wherever it is defined."""
    return [_zeros_like(g, g.node.inputs[0])]


@bprop("NLLLoss", wrt=(0,))
def nll_loss(g: Bprop) -> Grads:
    """Only the log-probabilities get a gradient (targets are indices, class weights constants); with LogSoftmax
    before it this is SoftmaxCrossEntropyLoss's gradient."""
    return [g.grad("NLLLossGrad", [g.dy, *g.node.inputs], 0)]


@bprop("Dropout")
def dropout(g: Bprop) -> Grads:
    """Training mode only (outputs y, mask): dx = DropoutGrad(dy, mask)."""
    return [g.grad("DropoutGrad", [g.dy, g.node.outputs[1]], 0)]


@bprop("Activation")
def activation(g: Bprop) -> Grads:
    return [g.grad("ActivationGrad", [g.dy, g.node.inputs[0]], 0)]
