"""Gradients of the dense ops: FullConnectionGrad and MatMulGrad. Products are single BLAS calls into the output
arrays."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._reduce_math import column_sums
from lite.kernels.full_connection import matmul_shape
from lite.kernels.grad.arithmetic_grad import broadcast_axes, sum_to


@register("FullConnectionGrad", DataType.FLOAT32)
class FullConnectionGradKernel(Kernel):
    """inputs: dy [..., out], x [..., in], weight [out, in] -> dx, dweight[, dbias [out]], with x and dy flattened
    to [M, in] / [M, out] over their leading axes: dx = dy @ W, dW = dy^T @ x, db = the column sums of dy."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, x, w = inputs[:3]
        if w.rank != 2 or x.rank < 1 or x.shape[-1] != w.shape[1] or dy.shape != x.shape[:-1] + w.shape[:1]:
            raise self.error(f"dy {list(dy.shape)}, x {list(x.shape)} and weight {list(w.shape)} do not match "
                             f"y = x @ weight^T")
        if len(self.node.outputs) not in (2, 3):
            raise self.error(f"has outputs dx, dweight[, dbias], not {len(self.node.outputs)}")
        specs = [TensorSpec(x.shape, dy.dtype), TensorSpec(w.shape, dy.dtype), TensorSpec(w.shape[:1], dy.dtype)]
        return specs[:len(self.node.outputs)]

    def bind(self, inputs, outputs, scratch) -> None:
        dy, x, w = inputs[:3]
        out_c, in_c = w.shape
        self.dy2d, self.x2d = dy.reshape(-1, out_c), x.reshape(-1, in_c)
        self.dx2d = outputs[0].reshape(-1, in_c)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.matmul(self.dy2d, inputs[2], out=self.dx2d)
        np.matmul(self.dy2d.T, self.x2d, out=outputs[1])
        if len(outputs) > 2:
            column_sums(self.dy2d, outputs[2])


def swapped(x: np.ndarray, transpose: bool) -> np.ndarray:
    return x.swapaxes(-1, -2) if transpose else x


@register("MatMulGrad", DataType.FLOAT32)
class MatMulGradKernel(Kernel):
    """inputs: dy, a, b of y = op(a) @ op(b) (op = the optional transpose of the last two axes, numpy matmul
    broadcasting and 1-D promotion) -> da (a's shape), db (b's shape).

    With A = op(a), B = op(b): dA = dy @ B^T and dB = A^T @ dy, transposed back for a transposed operand, and
    summed over the batch axes the operand was broadcast along. The gradient of a 2-D operand against a batched
    contiguous one folds the batch into the GEMM rows: one product, no reduction."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        dy, a, b = inputs[:3]
        ta, tb = self.attrs.transpose_a and a.rank > 1, self.attrs.transpose_b and b.rank > 1
        try:
            shape = matmul_shape(a.shape[:-2] + a.shape[:-3:-1] if ta else a.shape,
                                 b.shape[:-2] + b.shape[:-3:-1] if tb else b.shape)
        except ValueError as e:
            raise self.error(str(e)) from None
        if dy.shape != shape:
            raise self.error(f"dy {list(dy.shape)} is not the product's shape {list(shape)}")
        self.ta, self.tb = ta, tb
        a2 = (1,) + a.shape if a.rank == 1 else a.shape
        b2 = b.shape + (1,) if b.rank == 1 else b.shape
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
        self.fold = b.rank == 2 and len(batch) > 0 and a2[:-2] == batch and not ta
        self.fulls = [batch + a2[-2:], batch + b2[-2:]]
        self.axes = [broadcast_axes(a2, self.fulls[0]), broadcast_axes(b2, self.fulls[1])]
        if self.fold:
            self.axes[1] = ()
        return [TensorSpec(a.shape, dy.dtype), TensorSpec(b.shape, dy.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [TensorSpec(full, np.dtype(np.float32)) for full, axes in zip(self.fulls, self.axes) if axes]

    def bind(self, inputs, outputs, scratch) -> None:
        dy, a, b = inputs[:3]
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        dy2 = dy[..., None] if b.ndim == 1 else dy
        dy2 = dy2[..., None, :] if a.ndim == 1 else dy2
        da2, db2 = outputs[0].reshape(a2.shape), outputs[1].reshape(b2.shape)
        ta, tb = self.ta, self.tb
        op_a, op_b = swapped(a2, ta), swapped(b2, tb)
        if self.fold:                                   # rows of every batch entry at once
            op_a, dy2, da2 = (t.reshape(-1, t.shape[-1]) for t in (op_a, dy2, da2))
        dy2_t = dy2.swapaxes(-1, -2)
        products = [(op_b, dy2_t) if ta else (dy2, op_b.swapaxes(-1, -2)),
                    (dy2_t, op_a) if tb else (op_a.swapaxes(-1, -2), dy2)]
        work = list(scratch)
        self.steps = []
        for (lhs, rhs), out, axes in zip(products, (da2, db2), self.axes):
            target = work.pop(0) if axes else out
            self.steps.append((lhs, rhs, target, axes, out))

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        for lhs, rhs, target, axes, out in self.steps:
            np.matmul(lhs, rhs, out=target)
            if axes:
                sum_to(target, axes, out)
