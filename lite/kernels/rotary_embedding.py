"""RotaryEmbedding (ONNX opset 23): rotate pairs of each head's first rotary_dim features by position-dependent
angles, y1 = x1 cos - x2 sin, y2 = x1 sin + x2 cos; the pairs are the two halves (default) or neighbours
(`interleaved`). The rest of the head passes through. x is [B, H, S, D] or [B, S, H * D] (`num_heads`); the
caches are [max_position, rotary_dim / 2] indexed by position_ids [B, S], or [B, S, rotary_dim / 2] without them.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.dtypes import DataType
from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


@register("RotaryEmbedding", DataType.FLOAT32)
class RotaryEmbeddingKernel(Kernel):
    inplace = True          # each rotated pair is read whole before it is written

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x, cos, sin = inputs[:3]
        positions = inputs[3] if len(inputs) > 3 else None
        if x.rank not in (3, 4):
            raise self.error(f"input must be 3-D or 4-D, got {list(x.shape)}")
        heads = self.attrs.num_heads if x.rank == 3 else x.shape[1]
        if heads < 1 or x.rank == 3 and x.shape[2] % heads:
            raise self.error(f"3-D input {list(x.shape)} needs num_heads dividing its last axis", InvalidOpAttrError)
        batch, seq = x.shape[0], x.shape[1 if x.rank == 3 else 2]
        head = x.shape[-1] // heads if x.rank == 3 else x.shape[3]
        rotary = self.attrs.rotary_embedding_dim or head
        if rotary % 2 or rotary > head:
            raise self.error(f"rotary_embedding_dim {rotary} must be even and at most the head size {head}",
                             InvalidOpAttrError)
        table = (cos.shape[0], rotary // 2) if positions is not None else (batch, seq, rotary // 2)
        if cos.shape != sin.shape or cos.shape[-1] != rotary // 2 or positions is None and cos.shape != table \
                or positions is not None and (cos.rank != 2 or positions.shape != (batch, seq)):
            raise self.error(f"cos/sin caches {list(cos.shape)}, {list(sin.shape)} and position_ids "
                             f"{None if positions is None else list(positions.shape)} do not fit {list(table)} "
                             f"for input {list(x.shape)}")
        self.heads, self.head, self.half = heads, head, rotary // 2
        return [TensorSpec(x.shape, x.dtype)]

    def bind(self, inputs, outputs, scratch) -> None:
        x, out = inputs[0], outputs[0]
        # [B, S, H, D] or [B, H, S, D] views; the angle tables get a head axis to broadcast over
        self.x = x.reshape(x.shape[0], x.shape[1], self.heads, self.head) if x.ndim == 3 else x
        self.out = out.reshape(self.x.shape)
        self.head_axis = 2 if x.ndim == 3 else 1
        r = 2 * self.half
        self.halves = (np.s_[..., 0:r:2], np.s_[..., 1:r:2]) if self.attrs.interleaved else \
            (np.s_[..., :self.half], np.s_[..., self.half:r])

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        cos, sin = inputs[1], inputs[2]
        if len(inputs) > 3 and inputs[3] is not None:
            cos, sin = cos[inputs[3]], sin[inputs[3]]
        cos, sin = np.expand_dims(cos, self.head_axis), np.expand_dims(sin, self.head_axis)
        first, second = self.halves
        x1, x2 = self.x[first], self.x[second]
        y1, y2 = x1 * cos - x2 * sin, x1 * sin + x2 * cos
        if self.out is not self.x and not np.shares_memory(self.out, self.x):
            np.copyto(self.out, self.x)
        self.out[first], self.out[second] = y1, y2
