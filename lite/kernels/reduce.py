"""Reduce: mean, sum, max, min, product, L1 / L2 norm, log-sum, log-sum-exp or sum of squares over a set of
axes (ONNX ReduceMean/Sum/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare).

The optional `axes` input (int64) must be known at compile time; it names axes of the tensor as it is, so the
converter renumbers it when it changes the layout. No axes (or an empty list) reduces every axis, unless
`noop_with_empty_axes`, which makes the op an identity. A reduction over an empty set gives the operation's
identity element (0, 1, -inf for max and the logarithms, +inf for min), as in ONNX.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.arithmetic import divide
from lite.status import InvalidOpAttrError, NotSupportedError
from lite.traits import AXES_INPUT, Layout, declare
from schema import fb

M = fb.ReduceMode
Reducer = Callable[[np.ndarray, np.ndarray], None]


def _extremes(dtype: np.dtype) -> tuple[object, object]:
    """The lowest and highest values of `dtype`: the identities of max and min."""
    if dtype.kind == "b":
        return False, True
    if dtype.kind == "f":
        return -np.inf, np.inf
    info = np.iinfo(dtype)
    return info.min, info.max


def _mean(dtype: np.dtype, axes: tuple[int, ...], keep: bool, count: int) -> Reducer:
    """Sum, then divide by the element count (truncating for integers, like ONNX runtimes)."""
    divisor = np.array(count, dtype)

    def fn(x: np.ndarray, out: np.ndarray) -> None:
        np.add.reduce(x, axis=axes, keepdims=keep, out=out)
        divide(out, divisor, out)
    return fn


def _sum_of(transform: Callable[[np.ndarray], np.ndarray], axes: tuple[int, ...], keep: bool) -> Reducer:
    """The sum of transform(x) over axes."""
    return lambda x, out: np.add.reduce(transform(x), axis=axes, keepdims=keep, out=out)


def _l2(axes: tuple[int, ...], keep: bool) -> Reducer:
    """sqrt(sum(x^2)); integers are summed and rooted in float64 and truncated, as ONNX's reference does."""
    def fn(x: np.ndarray, out: np.ndarray) -> None:
        if out.dtype.kind == "f":
            np.add.reduce(np.square(x), axis=axes, keepdims=keep, out=out)
            np.sqrt(out, out=out)
        else:
            total = np.add.reduce(np.square(x, dtype=np.float64), axis=axes, keepdims=keep)
            np.copyto(out, np.sqrt(total), casting="unsafe")
    return fn


def _log_sum(axes: tuple[int, ...], keep: bool) -> Reducer:
    def fn(x: np.ndarray, out: np.ndarray) -> None:
        np.add.reduce(x, axis=axes, keepdims=keep, out=out)
        with np.errstate(divide="ignore"):        # log(0) = -inf, as ONNX defines it
            np.log(out, out=out)
    return fn


def _log_sum_exp(axes: tuple[int, ...], keep: bool) -> Reducer:
    """log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the max (0 where the max is infinite): no overflow."""
    def fn(x: np.ndarray, out: np.ndarray) -> None:
        top = np.maximum.reduce(x, axis=axes, keepdims=True, initial=-np.inf)
        top[~np.isfinite(top)] = 0.0
        shifted = np.subtract(x, top)
        np.exp(shifted, out=shifted)
        np.add.reduce(shifted, axis=axes, keepdims=keep, out=out)
        with np.errstate(divide="ignore"):
            np.log(out, out=out)
        out += top if keep else top.reshape(out.shape)
    return fn


def reducer(mode: int, dtype: np.dtype, axes: tuple[int, ...], keep: bool, count: int) -> Reducer | None:
    """`f(x, out)` reducing `axes` of x into out, or None for a mode this dtype does not support."""
    lowest, highest = _extremes(dtype)
    numeric, floating = dtype.kind in "iuf", dtype.kind == "f"
    ops: dict[int, Reducer | None] = {
        M.SUM: (lambda x, out: np.add.reduce(x, axis=axes, keepdims=keep, out=out)) if numeric else None,
        M.PROD: (lambda x, out: np.multiply.reduce(x, axis=axes, keepdims=keep, out=out)) if numeric else None,
        M.MEAN: _mean(dtype, axes, keep, count) if numeric else None,
        M.MAX: lambda x, out: np.maximum.reduce(x, axis=axes, keepdims=keep, out=out, initial=lowest),
        M.MIN: lambda x, out: np.minimum.reduce(x, axis=axes, keepdims=keep, out=out, initial=highest),
        M.L1: _sum_of(np.abs, axes, keep) if numeric else None,
        M.L2: _l2(axes, keep) if numeric else None,
        M.SUM_SQUARE: _sum_of(np.square, axes, keep) if numeric else None,
        M.LOG_SUM: _log_sum(axes, keep) if floating else None,
        M.LOG_SUM_EXP: _log_sum_exp(axes, keep) if floating else None,
    }
    return ops.get(mode)


declare("Reduce", layout=Layout(AXES_INPUT))


@register("Reduce")
class ReduceKernel(Kernel):
    """inputs: x (numeric; bool for max/min), axes? (int64, compile-time known); output: x reduced over axes,
    the reduced dims kept as 1 when `keep_dims`."""

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        axes = self._axes(x, inputs[1] if len(inputs) > 1 else None)
        if axes is None:
            self.reduce: Reducer = lambda x, out: np.copyto(out, x)
            return [TensorSpec(x.shape, x.dtype)]
        keep = bool(self.attrs.keep_dims)
        count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
        fn = reducer(self.attrs.mode, x.dtype, axes, keep, count)
        if fn is None:
            raise self.error(f"reduce mode {self.attrs.mode} does not support {x.dtype} input", NotSupportedError)
        self.reduce = fn
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape) if keep or a not in axes)
        return [TensorSpec(shape, x.dtype)]

    def _axes(self, x: TensorSpec, spec: TensorSpec | None) -> tuple[int, ...] | None:
        """The sorted, non-negative axes to reduce; None when the op is an identity."""
        given = None if spec is None else self.known(spec, "axes")
        if given is not None and given.dtype.kind not in "iu":
            raise self.error(f"axes must be integers, got {given.dtype}", InvalidOpAttrError)
        if given is None or given.size == 0:
            return None if self.attrs.noop_with_empty_axes else tuple(range(x.rank))
        axes = [int(a) for a in given.reshape(-1)]
        if any(not -x.rank <= a < x.rank for a in axes):
            raise self.error(f"axes {tuple(axes)} out of range for a rank-{x.rank} input", InvalidOpAttrError)
        normalised = sorted(a % x.rank for a in axes) if x.rank else []
        if len(set(normalised)) != len(normalised):
            raise self.error(f"axes {tuple(axes)} repeat an axis", InvalidOpAttrError)
        return tuple(normalised)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        self.reduce(inputs[0], outputs[0])
