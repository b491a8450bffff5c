"""DepthToSpace and SpaceToDepth on NCHW tensors (ONNX semantics): moving blocks of b x b pixels between the
channel axis and the spatial axes, as one reshape-transpose-copy.

In DCR mode the channel axis of the deep side is (b, b, C) ordered, in CRD mode (C, b, b). Any dtype.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from schema import fb


class BlockMoveKernel(Kernel):
    """Base: the output is x viewed as `split` dims, transposed by `perm`, written into the output's view."""

    def block(self, x: TensorSpec) -> int:
        b = int(self.attrs.block_size)
        if b < 1:
            raise self.error(f"blocksize must be >= 1, got {b}", InvalidOpAttrError)
        if x.rank != 4:
            raise self.error(f"the input must be 4-D NCHW, got shape {list(x.shape)}")
        return b

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        moved = inputs[0].reshape(self.split).transpose(self.perm)
        np.copyto(outputs[0].reshape(moved.shape), moved)


@register("DepthToSpace")
class DepthToSpaceKernel(BlockMoveKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        b = self.block(x)
        n, c, h, w = x.shape
        if c % (b * b):
            raise self.error(f"{c} channels are not divisible by blocksize² = {b * b}")
        if self.attrs.mode == fb.DepthToSpaceMode.CRD:
            self.split, self.perm = (n, c // (b * b), b, b, h, w), (0, 1, 4, 2, 5, 3)
        else:
            self.split, self.perm = (n, b, b, c // (b * b), h, w), (0, 3, 4, 1, 5, 2)
        return [TensorSpec((n, c // (b * b), h * b, w * b), x.dtype)]


@register("SpaceToDepth")
class SpaceToDepthKernel(BlockMoveKernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        b = self.block(x)
        n, c, h, w = x.shape
        if h % b or w % b:
            raise self.error(f"spatial dims {h}x{w} are not divisible by blocksize {b}")
        crd = self.attrs.mode == fb.DepthToSpaceMode.CRD
        self.split, self.perm = (n, c, h // b, b, w // b, b), (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        return [TensorSpec((n, c * b * b, h // b, w // b), x.dtype)]
