"""FullConnection (x @ W^T + b over the last axis, W [out, in]) and MatMul (numpy matmul semantics), both with
an optional fused activation. Both are single BLAS calls into the output array (the compiled sibling of
FullConnection fuses bias and clamp into its own GEMM: `compiled/full_connection.py`). FullConnection
may take a residual input (`fuse_residual`), added before the activation."""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels._conv_math import epilogue, finish, with_residual
from lite.kernels.activation import activation_fn
from lite.traits import declare


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """np.matmul's output shape (1-D operands promoted and their axis dropped); ValueError when they clash."""
    if not a or not b:
        raise ValueError("matmul operands must have at least one dimension")
    a2, b2 = (1,) + a if len(a) == 1 else a, b + (1,) if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        raise ValueError(f"inner dimensions differ: {list(a)} @ {list(b)}")
    shape = np.broadcast_shapes(a2[:-2], b2[:-2])
    if len(a) > 1:
        shape += (a[-2],)
    if len(b) > 1:
        shape += (b[-1],)
    return shape


def swap_last(x: np.ndarray, transpose: bool) -> np.ndarray:
    """The matrix transpose of `x` as a view (a no-op for 1-D operands or when not asked)."""
    return x.swapaxes(-1, -2) if transpose and x.ndim > 1 else x


declare("FullConnection", weight_input=1, weight_axis=0, bias_input=2, bias_correction=True, fused_activation=True,
        batchnorm_folds=True, residual_input=3)


@register("FullConnection", DataType.FLOAT32)
class FullConnectionKernel(Kernel):
    float16_compute = True
    epilogue = staticmethod(epilogue)    # bias + activation after the product (a sibling may fuse them)

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        if w.rank != 2 or x.rank < 1 or x.shape[-1] != w.shape[1]:
            raise self.error(f"input {list(x.shape)} does not match weight [out, in] {list(w.shape)}")
        if bias is not None and bias.shape != (w.shape[0],):
            raise self.error(f"bias must have shape [{w.shape[0]}], got {list(bias.shape)}")
        shape = x.shape[:-1] + (w.shape[0],)
        residual = inputs[3] if len(inputs) > 3 else None
        if residual is not None and (tuple(residual.shape) != shape or residual.dtype != x.dtype):
            raise self.error(f"residual input must be {np.dtype(x.dtype).name} {list(shape)} like the output, got "
                             f"{residual.dtype.name} {list(residual.shape)}")
        self.activation = activation_fn(self.attrs.activation)
        return [TensorSpec(shape, x.dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        x, w, out = inputs[0], inputs[1], outputs[0]
        bias = inputs[2] if len(inputs) > 2 else None
        residual = inputs[3] if len(inputs) > 3 else None          # fuse_residual: summed before the activation
        self.x2d = x.reshape(-1, x.shape[-1])
        self.w_t = w.T                                  # a view: BLAS reads the transpose directly
        self.out2d = out.reshape(-1, w.shape[0])
        self.macs = self.blas_macs = self.x2d.size * w.shape[0]
        self.multiply = functools.partial(np.matmul, self.x2d, self.w_t, out=self.out2d)
        if residual is None:
            self.finish = self.epilogue(self.out2d, bias, self.attrs.activation)
        else:
            self.finish = with_residual(self.epilogue(self.out2d, bias, 0), out, residual, self.activation)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.multiply()
        if self.finish is not None:
            self.finish()


def matmul_shapes(kernel: Kernel, a: TensorSpec, b: TensorSpec
                  ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(output shape, a's shape, b's shape) of a MatMul node, the operands' shapes after its transposes."""
    ta, tb = kernel.attrs.transpose_a and a.rank > 1, kernel.attrs.transpose_b and b.rank > 1
    a_shape = a.shape[:-2] + a.shape[:-3:-1] if ta else a.shape
    b_shape = b.shape[:-2] + b.shape[:-3:-1] if tb else b.shape
    try:
        return matmul_shape(a_shape, b_shape), a_shape, b_shape
    except ValueError as e:
        raise kernel.error(str(e)) from None


declare("MatMul", weight_input=1, weight_axis=-1, bias_correction=True, fused_activation=True)


@register("MatMul", DataType.FLOAT32, DataType.FLOAT64, DataType.INT32, DataType.INT64, DataType.UINT32,
          DataType.UINT64)
class MatMulKernel(Kernel):
    """Every type ONNX MatMul allows: float16/bfloat16 through the float32 kernel, the rest as stored
    (integer products wrap, as onnxruntime's do)."""
    float16_compute = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a, b = inputs[0], inputs[1]
        shape, a_shape, b_shape = matmul_shapes(self, a, b)
        self.activation = activation_fn(self.attrs.activation)
        return [TensorSpec(shape, np.result_type(a.dtype, b.dtype))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.a = swap_last(inputs[0], self.attrs.transpose_a)
        self.b = swap_last(inputs[1], self.attrs.transpose_b)
        self.macs = self.blas_macs = outputs[0].size * self.a.shape[-1]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out = outputs[0]
        np.matmul(self.a, self.b, out=out)
        finish(out, None, self.activation)
