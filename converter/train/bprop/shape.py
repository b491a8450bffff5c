"""bprop rules of the shape and data-movement ops: only the data input (0, or every input of Concat) carries a
gradient; shapes, starts, pads and axes are parameters."""
from __future__ import annotations

import numpy as np

from converter.ir import Value
from converter.train.bprop.rule import Bprop, Grads, bprop
from lite import dtypes
from lite.status import NotSupportedError
from schema import fb


@bprop("Reshape", "Flatten", "Squeeze", "Unsqueeze", wrt=(0,))
def reshape(g: Bprop) -> Grads:
    return [g.grad("ReshapeGrad", [g.dy, g.node.inputs[0]], 0)]


@bprop("Transpose", wrt=(0,))
def transpose(g: Bprop) -> Grads:
    inverse = [int(p) for p in np.argsort(g.node.attrs["perm"])]
    return [g.grad("Transpose", [g.dy], 0, perm=inverse)]


@bprop("Concat")
def concat(g: Bprop) -> Grads:
    return g.grads("ConcatGrad", [g.dy, *g.node.inputs], range(len(g.node.inputs)))


@bprop("Split", wrt=(0,))
def split(g: Bprop) -> Grads:
    """SplitGrad(x, dy0, dy1, ...): a part without a gradient contributes zeros of its shape."""
    dys = [dy or _zeros_like(g, y) for dy, y in zip(g.dys, g.node.outputs)]
    return [g.grad("SplitGrad", [g.node.inputs[0], *dys], 0)]


def _zeros_like(g: Bprop, name: str) -> str:
    y = g.value(name)
    shape = g.emit("Shape", [name], [Value("", (y.rank,), np.dtype(np.int64))])
    return g.emit("ConstantOfShape", shape, [name], data_type=dtypes.from_numpy(y.dtype), value=0.0)[0]


@bprop("Slice", wrt=(0,))
def slice_(g: Bprop) -> Grads:
    return [g.grad("SliceGrad", [g.dy, *g.node.inputs], 0)]


@bprop("Pad", wrt=(0,))
def pad(g: Bprop) -> Grads:
    """Constant padding only: the gradient is dy cropped back to x."""
    if g.node.attrs.get("mode", fb.PaddingFill.CONSTANT) != fb.PaddingFill.CONSTANT:
        raise NotSupportedError(f"Pad node '{g.prefix}': only constant padding can be trained through")
    x, pads = g.node.inputs[:2]
    return [g.grad("PadGrad", [g.dy, x, pads], 0)]


@bprop("Reduce", wrt=(0,))
def reduce(g: Bprop) -> Grads:
    x, axes = g.node.inputs[0], g.node.inputs[1:]
    return [g.grad("ReduceGrad", [g.dy, x, g.node.outputs[0], *axes], 0)]


@bprop("Identity")
def identity(g: Bprop) -> Grads:
    return [g.dy]


@bprop("Cast")
def cast(g: Bprop) -> Grads:
    """Float to float only (other casts have no float path for a gradient): dy cast back to x's type."""
    x = g.value(g.node.inputs[0])
    if x.dtype == g.value(g.node.outputs[0]).dtype:
        return [g.dy]
    return [g.grad("Cast", [g.dy], 0, to=dtypes.from_numpy(x.dtype))]
