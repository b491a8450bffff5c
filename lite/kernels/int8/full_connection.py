"""int8 FullConnection (x @ W^T + b, W [out, in] int8 constant, per-channel along out) and MatMul (a @ b, both
int8; a constant b may be per-channel along its last axis), as exact float32 BLAS products (common.ExactGemm);
FullConnection's compiled sibling runs an integer GEMM instead, requantizing as it writes."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.full_connection import matmul_shapes, swap_last
from lite.kernels.int8.common import (ExactGemm, chunk_depth, even_ranges, exact_ranges, fused_bounds, input_quant,
                                      output_quant)
from lite.kernels.int8.conv2d import MAX_ABS_X, acc_bounds, channel_values, weight_terms
from lite.kernels.int8.requantize import Requantizer, real_multiplier, scales, zero_points
from lite.status import NotSupportedError

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


@register("FullConnection", DataType.INT8, quantized=True)
class FullConnectionInt8Kernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, w = inputs[0], inputs[1]
        bias = inputs[2] if len(inputs) > 2 else None
        if w.rank != 2 or x.rank < 1 or x.shape[-1] != w.shape[1]:
            raise self.error(f"input {list(x.shape)} does not match weight [out, in] {list(w.shape)}")
        out_c = w.shape[0]
        if bias is not None and bias.shape != (out_c,):
            raise self.error(f"bias must have shape [{out_c}], got {list(bias.shape)}")
        if w.value is None or w.dtype != np.int8 or (bias is not None and
                                                     (bias.value is None or bias.dtype != np.int32)):
            raise self.error("needs a constant int8 weight and a constant int32 bias", NotSupportedError)
        qx, qy = input_quant(self, x), output_quant(self, x.dtype)
        s_w = channel_values(self, scales(w.quant or []), out_c, "the weight")
        zp_w = channel_values(self, zero_points(w.quant or []), out_c, "the weight")
        centred, folded = weight_terms(w.value, zp_w, bias.value if bias is not None else None, qx.zero_point)
        self.weight = np.ascontiguousarray(centred.T, F32)                               # [K, O]
        self.ranges = exact_ranges(centred.T, MAX_ABS_X)
        self.rows = int(np.prod(x.shape[:-1], dtype=np.int64))
        lo, hi = fused_bounds(self, self.attrs.activation, qy)
        self.requantize = Requantizer.build(real_multiplier(qx.scale, s_w, qy.scale, self.node.rounding),
                                            qy.zero_point, lo, hi, folded, acc_bounds(centred, MAX_ABS_X),
                                            self.node.rounding)
        self.centred = centred
        return [TensorSpec(x.shape[:-1] + (out_c,), x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        k, o = self.weight.shape
        total = [TensorSpec((self.rows, o), F64)] if len(self.ranges) > 1 else []
        return [TensorSpec((self.rows, k), F32), TensorSpec((self.rows, o), F32), *total,
                Requantizer.work((self.rows, o))]

    def bind(self, inputs, outputs, scratch) -> None:
        self.lhs, product = scratch[:2]
        total = scratch[2] if len(self.ranges) > 1 else None
        self.x2d = inputs[0].reshape(self.lhs.shape)
        self.gemm = ExactGemm.build(self.lhs, self.weight, self.ranges, product, total)
        self.finish = self.requantize.bind(self.gemm.result, outputs[0].reshape(product.shape), scratch[-1])

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(self.lhs, self.x2d)
        self.gemm()
        self.finish()


@register("MatMul", DataType.INT8, quantized=True)
class MatMulInt8Kernel(Kernel):
    """acc = (a - zp_a) @ (b - zp_b); per-tensor a, per-tensor or per-column b (the columns of op(b))."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a, b = inputs[0], inputs[1]
        if b.dtype != np.int8:
            raise self.error(f"both operands must be int8, b is {b.dtype}", NotSupportedError)
        shape, a_shape, b_shape = matmul_shapes(self, a, b)
        tb = self.attrs.transpose_b and b.rank > 1
        qa, qy = input_quant(self, a, "input a"), output_quant(self, a.dtype)
        columns = b_shape[-1] if b.rank > 1 else 1
        s_b = channel_values(self, scales(b.quant or []), columns, "input b")
        zp_b = channel_values(self, zero_points(b.quant or []), columns, "input b")
        layout = [1] * b.rank
        if b.rank > 1:
            layout[-2 if tb else -1] = columns
        self.zp_a, self.zp_b = np.float32(qa.zero_point), zp_b.reshape(layout).astype(np.float32)
        self.b_const = None if b.value is None else np.asarray(b.value - self.zp_b, np.float32)
        max_a = max(qa.zero_point - qa.lo, qa.hi - qa.zero_point)
        max_b = 255 if b.value is None else int(np.abs(self.b_const).max(initial=0))
        self.ranges = (exact_ranges(self.b_const if not tb else self.b_const.T, max_a)
                       if self.b_const is not None and b.rank == 2 else
                       even_ranges(a_shape[-1], chunk_depth(a_shape[-1], max_a * max_b)))
        self.shapes = (a.shape, b.shape, shape)
        lo, hi = fused_bounds(self, self.attrs.activation, qy)
        real = real_multiplier(qa.scale, s_b, qy.scale, self.node.rounding)
        self.requantize = Requantizer.build(real if b.rank > 1 else real[0], qy.zero_point, lo, hi,
                                            acc_bound=a_shape[-1] * max_a * max_b, rounding=self.node.rounding)
        return [TensorSpec(shape, a.dtype)]

    def scratch(self) -> list[TensorSpec]:
        a, b, out = self.shapes
        specs = [TensorSpec(a, F32)] + ([TensorSpec(b, F32)] if self.b_const is None else [])
        total = [TensorSpec(out, F64)] if len(self.ranges) > 1 else []
        return specs + [TensorSpec(out, F32), *total, Requantizer.work(out)]

    def bind(self, inputs, outputs, scratch) -> None:
        work = list(scratch)
        self.fa = work.pop(0)
        self.fb = work.pop(0) if self.b_const is None else self.b_const
        product = work[0]
        total = work[1] if len(self.ranges) > 1 else None
        lhs = swap_last(self.fa, self.attrs.transpose_a)
        rhs = swap_last(self.fb, self.attrs.transpose_b)
        lhs = lhs[None] if lhs.ndim == 1 else lhs
        rhs = rhs[:, None] if rhs.ndim == 1 else rhs
        shape = np.broadcast_shapes(lhs.shape[:-2], rhs.shape[:-2]) + (lhs.shape[-2], rhs.shape[-1])
        self.gemm = ExactGemm.build(lhs, rhs, self.ranges, product.reshape(shape),
                                    None if total is None else total.reshape(shape))
        self.finish = self.requantize.bind(self.gemm.result.reshape(outputs[0].shape), outputs[0], work[-1])

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.subtract(inputs[0], self.zp_a, out=self.fa)
        if self.b_const is None:
            np.subtract(inputs[1], self.zp_b, out=self.fb)
        self.gemm()
        self.finish()
