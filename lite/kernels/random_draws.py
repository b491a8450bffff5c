"""Random: normal, uniform, Bernoulli and multinomial draws (ONNX RandomNormal(Like), RandomUniform(Like),
Bernoulli, Multinomial). Never folded, even with known inputs: every run draws anew.

Reproducible per session: each kernel owns a PCG64 generator seeded at compile time from the node's `seed`
attribute (its float32 bits) or, without one, from a hash of the node's name, so two sessions of one model draw
the same sequence and two nodes draw different ones. Multinomial samples all rows at once: one search of the
uniform draws in the row-offset cumulative distributions."""
from __future__ import annotations

import zlib
from typing import Sequence

import numpy as np

from lite import dtypes
from lite.kernel import Kernel, TensorSpec, register
from lite.model import NodeDef
from lite.status import InvalidOpAttrError, LiteError
from schema import fb

M = fb.RandomMode


def seed_words(node: NodeDef) -> list[int]:
    """The generator's seed: the bits of the float32 `seed` attribute, else the CRC-32 of the node's name."""
    if node.attrs.has_seed:
        return [int(np.float32(node.attrs.seed).view(np.uint32))]
    return [zlib.crc32(node.name.encode())]


@register("Random")
class RandomKernel(Kernel):
    foldable = False

    def __init__(self, node: NodeDef):
        super().__init__(node)
        self.rng = np.random.Generator(np.random.PCG64(seed_words(node)))

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        a, x = self.attrs, inputs[0] if inputs else None
        try:
            dtype = dtypes.to_numpy(a.data_type)
        except LiteError as e:
            raise self.error(f"data_type {a.data_type}: {e}", InvalidOpAttrError) from None
        if a.mode in (M.NORMAL, M.UNIFORM):
            shape = x.shape if x is not None else tuple(int(d) for d in (a.shape if a.shape is not None else []))
            if dtype.kind != "f" or any(d < 0 for d in shape):
                raise self.error(f"needs a float data type and a non-negative shape, got {dtype} {list(shape)}",
                                 InvalidOpAttrError)
            return [TensorSpec(shape, dtype)]
        if x is None or x.dtype.kind != "f":
            raise self.error("needs a float input")
        if a.mode == M.BERNOULLI:
            return [TensorSpec(x.shape, dtype)]
        if a.mode == M.MULTINOMIAL:
            if x.rank != 2 or dtype not in (np.int32, np.int64) or a.sample_size < 1:
                raise self.error(f"needs input [batch, classes], an int32/int64 data type and sample_size >= 1, got "
                                 f"{list(x.shape)}, {dtype} and {a.sample_size}", InvalidOpAttrError)
            return [TensorSpec((x.shape[0], a.sample_size), dtype)]
        raise self.error(f"random mode {a.mode} is not one of NORMAL, UNIFORM, BERNOULLI, MULTINOMIAL",
                         InvalidOpAttrError)

    def run(self, inputs: Sequence[np.ndarray | None], outputs: Sequence[np.ndarray]) -> None:
        a, out = self.attrs, outputs[0]
        if a.mode == M.NORMAL:
            np.copyto(out, self.rng.standard_normal(out.shape) * a.scale + a.mean, casting="unsafe")
        elif a.mode == M.UNIFORM:
            np.copyto(out, self.rng.uniform(a.low, a.high, out.shape), casting="unsafe")
        elif a.mode == M.BERNOULLI:
            np.copyto(out, self.rng.random(out.shape) < inputs[0], casting="unsafe")
        else:
            self._multinomial(inputs[0].astype(np.float64), out)

    def _multinomial(self, logits: np.ndarray, out: np.ndarray) -> None:
        """Row r's cumulative distribution is shifted by r, so one sorted search serves every row."""
        batch, classes = logits.shape
        weights = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(weights, axis=1)
        cdf /= cdf[:, -1:]
        rows = np.arange(batch)[:, None]
        draws = self.rng.random(out.shape) + rows
        found = np.searchsorted((cdf + rows).reshape(-1), draws.reshape(-1), side="right").reshape(out.shape)
        np.copyto(out, np.minimum(found - rows * classes, classes - 1), casting="unsafe")
