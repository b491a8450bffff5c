"""CenterCropPad: x cropped or zero-padded to `shape` along `axes` (all when empty), centred; an odd difference
puts the extra element at the end (ONNX CenterCropPad). `shape` sizes the output, so it must be known at compile
time. Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.kernels.reshape import normalize_axes


@register("CenterCropPad")
class CenterCropPadKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, target = inputs[0], self.known(inputs[1], "shape")
        axes = normalize_axes(self, self.attrs.axes, x.rank, "axes") if len(self.attrs.axes) else range(x.rank)
        axes = list(axes)
        if target.shape != (len(axes),) or target.dtype.kind not in "iu" or (target.size and target.min() < 0):
            raise self.error(f"shape must be {len(axes)} non-negative integers, got {target.tolist()}")
        shape, self.crop, self.place = list(x.shape), [slice(None)] * x.rank, [slice(None)] * x.rank
        for a, n in zip(axes, (int(t) for t in target)):
            d = x.shape[a]
            if n < d:
                self.crop[a] = slice((d - n) // 2, (d - n) // 2 + n)
            elif n > d:
                self.place[a] = slice((n - d) // 2, (n - d) // 2 + d)
            shape[a] = n
        self.crop, self.place = tuple(self.crop), tuple(self.place)
        return [TensorSpec(tuple(shape), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        outputs[0].fill(0)
        outputs[0][self.place] = inputs[0][self.crop]
