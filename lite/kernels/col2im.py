"""Col2Im: the inverse of im2col (ONNX Col2Im): column blocks [N, C * prod(block), L] summed back into images
[N, C, *image_shape], overlapping blocks adding up. Any number of spatial dims.

Every (block offset, block position) pair has one linear index into the padded image, computed once at compile
time; the run is one scatter-add (`np.add.at`) into a scratch image and a crop of the padding. image_shape and
block_shape size the output and must be known at compile time. float32 and other numeric dtypes.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError


def block_indices(padded: Sequence[int], block: Sequence[int], dilations: Sequence[int],
                  strides: Sequence[int]) -> np.ndarray:
    """[prod(block), L]: the flat padded-image index that each block element lands on at each block position."""
    n = len(padded)
    counts = [(p - d * (k - 1) - 1) // s + 1 for p, k, d, s in zip(padded, block, dilations, strides)]
    flat_strides = np.cumprod([1, *padded[::-1]])[:-1][::-1]
    lin = np.zeros((1,) * (2 * n), np.int64)
    for d in range(n):      # one broadcast term per spatial dim
        pos = np.arange(block[d])[:, None] * dilations[d] + np.arange(counts[d])[None, :] * strides[d]
        shape = [1] * (2 * n)
        shape[d], shape[n + d] = block[d], counts[d]
        lin = lin + pos.reshape(shape) * flat_strides[d]
    return lin.reshape(int(np.prod(block)), -1)


@register("Col2Im")
class Col2ImKernel(Kernel):
    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        image = [int(v) for v in self.known(inputs[1], "image_shape").reshape(-1)]
        block = [int(v) for v in self.known(inputs[2], "block_shape").reshape(-1)]
        n = len(image)
        dilations = list(self.attrs.dilations) or [1] * n
        strides = list(self.attrs.strides) or [1] * n
        pads = list(self.attrs.pads) or [0] * (2 * n)
        if len(block) != n or len(dilations) != n or len(strides) != n or len(pads) != 2 * n:
            raise self.error(f"image_shape {image}, block_shape {block}, dilations {dilations}, strides {strides} "
                             f"and pads {pads} disagree on the number of spatial dims", InvalidOpAttrError)
        if min(block + dilations + strides + image, default=1) < 1 or min(pads, default=0) < 0:
            raise self.error("image and block dims, dilations and strides must be positive, pads non-negative",
                             InvalidOpAttrError)
        padded = [i + pads[d] + pads[n + d] for d, i in enumerate(image)]
        self.lin = block_indices(padded, block, dilations, strides)
        k = int(np.prod(block))
        if x.rank != 3 or x.shape[1] % k or x.shape[2] != self.lin.shape[1]:
            raise self.error(f"input {list(x.shape)} must be [N, C * {k}, {self.lin.shape[1]}] for these blocks")
        batch, channels = x.shape[0], x.shape[1] // k
        self.split = (batch, channels, k, self.lin.shape[1])
        self.padded = TensorSpec((batch, channels, int(np.prod(padded))), x.dtype)
        self.padded_shape = (batch, channels, *padded)
        self.crop = (slice(None), slice(None), *(slice(pads[d], pads[d] + image[d]) for d in range(n)))
        return [TensorSpec((batch, channels, *image), x.dtype)]

    def scratch(self) -> list[TensorSpec]:
        return [self.padded]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        padded = self.work[0]
        padded.fill(0)
        np.add.at(padded, (slice(None), slice(None), self.lin), inputs[0].reshape(self.split))
        np.copyto(outputs[0], padded.reshape(self.padded_shape)[self.crop])
