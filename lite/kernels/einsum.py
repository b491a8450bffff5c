"""Einsum: numpy's (= ONNX's) Einstein summation over any number of inputs of one numeric dtype.

The output shape comes from parsing the equation at compile time (so nothing is evaluated there); an omitted
"->" means the implicit output: the broadcast ellipsis dims, then the labels used once, in alphabetical order.
Two or more inputs contract along numpy's optimised path (pairwise BLAS products)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError, NotSupportedError


def _term_dims(term: str, shape: tuple[int, ...]) -> tuple[dict[str, int], tuple[int, ...]] | None:
    """{label: size} and the ellipsis dims of one input term, or None when the rank does not fit the term."""
    pre, ellipsis, post = term.partition("...")
    covered = len(shape) - len(pre) - len(post)
    if covered < 0 or (not ellipsis and covered):
        return None
    labels = pre + post
    dims = shape[:len(pre)] + shape[len(shape) - len(post):]
    sizes: dict[str, int] = {}
    for label, size in zip(labels, dims):
        if sizes.setdefault(label, size) != size:
            return None
    return sizes, shape[len(pre):len(pre) + covered]


def parse(equation: str, shapes: Sequence[tuple[int, ...]]) -> tuple[str, tuple[int, ...]]:
    """The explicit equation ("...->...") and output shape; ValueError describes what does not fit."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"the equation has {len(terms)} input terms for {len(shapes)} inputs")
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipsis: tuple[int, ...] = ()
    for term, shape in zip(terms, shapes):
        if not all(c.isalpha() for c in term.replace("...", "")):
            raise ValueError(f"term '{term}' has characters other than letters and one ellipsis")
        parsed = _term_dims(term, shape)
        if parsed is None:
            raise ValueError(f"term '{term}' does not fit an input of shape {list(shape)}")
        for label, size in parsed[0].items():
            if sizes.setdefault(label, size) != size:
                raise ValueError(f"label '{label}' has sizes {sizes[label]} and {size}")
            counts[label] = counts.get(label, 0) + term.count(label)
        try:
            ellipsis = tuple(np.broadcast_shapes(ellipsis, parsed[1]))
        except ValueError:
            raise ValueError(f"the ellipsis dims {list(parsed[1])} do not broadcast with {list(ellipsis)}") from None
    has_ellipsis = any("..." in t for t in terms)
    if not arrow:
        rhs = ("..." if has_ellipsis else "") + "".join(sorted(c for c, n in counts.items() if n == 1))
    pre, dots, post = rhs.partition("...")
    unknown = [c for c in pre + post if c not in sizes]
    if unknown or (dots and not has_ellipsis) or len(set(pre + post)) != len(pre + post):
        raise ValueError(f"output term '{rhs}' names labels no input has, or repeats one")
    shape = tuple(sizes[c] for c in pre) + (ellipsis if dots else ()) + tuple(sizes[c] for c in post)
    return f"{lhs}->{rhs}", shape


@register("Einsum")
class EinsumKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        if not inputs or any(s is None for s in inputs):
            raise self.error("needs at least one input and no omitted ones")
        dtypes = {s.dtype for s in inputs}
        if len(dtypes) != 1 or inputs[0].dtype.kind not in "iuf":
            raise self.error(f"inputs must share one numeric dtype, got {sorted(map(str, dtypes))}",
                             NotSupportedError)
        equation = self.attrs.equation or ""
        equation = equation.decode() if isinstance(equation, bytes) else equation    # as read from a file
        try:
            self.equation, shape = parse(equation, [s.shape for s in inputs])
        except ValueError as e:
            raise self.error(f"equation '{equation}': {e}", InvalidOpAttrError) from None
        self.optimize = len(inputs) > 1
        return [TensorSpec(shape, inputs[0].dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.einsum(self.equation, *inputs, out=outputs[0], optimize=self.optimize)
