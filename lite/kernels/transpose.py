"""Transpose: permute dimensions (the layout changes at graph borders and around axis-bound ops)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from lite.kernel import Kernel, TensorSpec, register
from lite.status import InvalidOpAttrError
from lite.traits import IDENTITY_PERM, declare


declare("Transpose", noop=IDENTITY_PERM, same_quant=True)


@register("Transpose")
class TransposeKernel(Kernel):
    native_dtypes = True

    def infer(self, inputs: Sequence[TensorSpec | None]) -> list[TensorSpec]:
        x = inputs[0]
        perm = tuple(int(p) for p in self.attrs.perm) if self.attrs.perm is not None else ()
        if sorted(perm) != list(range(x.rank)):
            raise self.error(f"perm {list(perm)} is not a permutation of {x.rank} axes", InvalidOpAttrError)
        self.perm = perm
        return [TensorSpec(tuple(x.shape[p] for p in perm), x.dtype)]

    def run(self, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> None:
        np.copyto(outputs[0], inputs[0].transpose(self.perm))
