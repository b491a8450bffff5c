"""RMSNorm (ONNX RMSNormalization, opset 23): y = x / sqrt(mean(x^2 over axes [axis, rank)) + epsilon) * scale,
scale broadcasting against the normalised trailing shape. LayerNorm without the centring, as LLaMA-style
transformers use it.

The optional output invrms = 1 / sqrt(mean(x^2) + epsilon) (x.shape[:axis] followed by ones) is what
RMSNormGrad reads in a training graph.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from lite.traits import TrainMode, declare


def rms_norm(x2d: np.ndarray, epsilon: float, out2d: np.ndarray, invrms: np.ndarray) -> None:
    """Normalise each row of x [M, K] into out [M, K] (out may be x); invrms [M] gets each row's factor."""
    np.einsum("ij,ij->i", x2d, x2d, out=invrms)             # no full-size temporary
    invrms /= x2d.shape[1]
    invrms += epsilon
    np.sqrt(invrms, out=invrms)
    np.reciprocal(invrms, out=invrms)
    np.multiply(x2d, invrms[:, None], out=out2d)


def normalised_rows(kernel: Kernel, x: TensorSpec, scale: TensorSpec) -> tuple[int, tuple[int, ...]]:
    """(rows, normalised trailing shape) of an RMSNorm / RMSNormGrad node, with its attributes checked."""
    if not -x.rank <= kernel.attrs.axis < x.rank:
        raise kernel.error(f"axis {kernel.attrs.axis} is out of range for rank {x.rank}", InvalidOpAttrError)
    axis = kernel.attrs.axis % x.rank
    inner = x.shape[axis:]
    if np.broadcast_shapes(inner, scale.shape) != inner:
        raise kernel.error(f"scale {list(scale.shape)} does not broadcast to the normalised shape {list(inner)}")
    return int(np.prod(x.shape[:axis], dtype=np.int64)), inner


declare("RMSNorm", train=TrainMode(outputs=("invrms",)))


@register("RMSNorm", DataType.FLOAT32)
class RMSNormKernel(Kernel):
    """inputs: x, scale -> y[, invrms]."""
    inplace = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, scale = inputs[0], inputs[1]
        self.rows, inner = normalised_rows(self, x, scale)
        if len(self.node.outputs) not in (1, 2):
            raise self.error(f"has outputs y or y, invrms, not {len(self.node.outputs)}")
        stat = TensorSpec(x.shape[:x.rank - len(inner)] + (1,) * len(inner), x.dtype)
        return [TensorSpec(x.shape, x.dtype)] + [stat] * (len(self.node.outputs) - 1)

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec((self.rows,), np.dtype(np.float32))] if len(self.node.outputs) == 1 else []

    def bind(self, inputs, outputs, scratch) -> None:
        self.x2d, self.out2d = inputs[0].reshape(self.rows, -1), outputs[0].reshape(self.rows, -1)
        self.invrms = outputs[1].reshape(self.rows) if len(outputs) > 1 else scratch[0]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        rms_norm(self.x2d, self.attrs.epsilon, self.out2d, self.invrms)
        outputs[0] *= inputs[1]
