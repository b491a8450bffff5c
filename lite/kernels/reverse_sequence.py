"""ReverseSequence: for each batch entry b, the first sequence_lens[b] steps along `time_axis` reversed, the
rest unchanged (ONNX ReverseSequence). Batch and time axes are 0 and 1 in either order. Any dtype.

One gather along the time axis: step t of batch b reads step lens[b] - 1 - t when t < lens[b], else t.
Sequence lengths may arrive at run time; they must lie in [0, time steps].
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InferShapeError, InvalidOpAttrError, LiteError, OpExecuteError


@register("ReverseSequence")
class ReverseSequenceKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, lens = inputs[0], inputs[1]
        batch, time = int(self.attrs.batch_axis), int(self.attrs.time_axis)
        if {batch, time} != {0, 1} or x.rank < 2:
            raise self.error(f"batch_axis {batch} and time_axis {time} must be 0 and 1 of an input of rank >= 2",
                             InvalidOpAttrError)
        if lens.shape != (x.shape[batch],) or lens.dtype.kind not in "iu":
            raise self.error(f"sequence_lens must be {x.shape[batch]} integers, got {lens.dtype} "
                             f"{list(lens.shape)}")
        self.time, self.steps = time, x.shape[time]
        self.index_shape = (x.shape[0], x.shape[1]) + (1,) * (x.rank - 2)
        self.index = None if lens.value is None else self._index(lens.value, InferShapeError)
        return [TensorSpec(x.shape, x.dtype)]

    def _index(self, lens: np.ndarray, kind: type[LiteError]) -> np.ndarray:
        """The source step of every (batch, time) pair, laid out as x's first two axes."""
        if lens.size and (lens.min() < 0 or lens.max() > self.steps):
            raise self.error(f"sequence_lens {lens.tolist()} must lie in [0, {self.steps}]", kind)
        t = np.arange(self.steps)[None, :]
        n = lens.astype(np.int64)[:, None]
        source = np.where(t < n, n - 1 - t, t)          # [batch, time]
        return (source.T if self.time == 0 else source).reshape(self.index_shape)

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        index = self.index if self.index is not None else self._index(inputs[1], OpExecuteError)
        np.copyto(outputs[0], np.take_along_axis(inputs[0], index, axis=self.time))
