"""Range: start, start + delta, ... up to (not including) limit (ONNX Range): max(ceil((limit - start) / delta),
0) entries of the inputs' type. The count sizes the output, so all three inputs must be known at compile time
(`range_count`). A zero or non-finite delta, or non-finite bounds, have no count and are refused.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register

MAX_COUNT = 1 << 31


def range_count(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> int | str:
    """The number of entries, or why there is none."""
    if any(v.size != 1 for v in (start, limit, delta)):
        return "start, limit and delta must be scalars"
    a, b, d = (v.reshape(-1)[0].item() for v in (start, limit, delta))
    if d == 0:
        return "delta is zero"
    if start.dtype.kind == "f" and not all(math.isfinite(v) for v in (a, b, d)):
        return f"start {a}, limit {b} and delta {d} must be finite"
    count = -((a - b) // d) if start.dtype.kind in "iu" else math.ceil((b - a) / d)
    if count > MAX_COUNT:
        return f"{count} entries from start {a}, limit {b}, delta {d} is too many"
    return max(int(count), 0)


@register("Range")
class RangeKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        values = [self.known(s, name) for s, name in zip(inputs, ("start", "limit", "delta"))]
        if len({v.dtype for v in values}) != 1:
            raise self.error(f"start, limit and delta must have one type, got {[str(v.dtype) for v in values]}")
        count = range_count(*values)
        if isinstance(count, str):
            raise self.error(count)
        return [TensorSpec((count,), values[0].dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        out = outputs[0]
        start, delta = inputs[0].reshape(-1)[0], inputs[2].reshape(-1)[0]
        np.copyto(out, start + np.arange(out.size, dtype=np.float64 if out.dtype.kind == "f" else out.dtype) * delta,
                  casting="unsafe")
