"""A MINDIR model as the converter's source (`converter.frontends.SourceModel`): parsed once, imported into IR,
its float parameters the weights a training graph trains."""
from __future__ import annotations

from typing import Collection

import numpy as np

from converter.frontends.mindir.importer import Model, float_weights, import_model
from converter.frontends.mindir.reader import parse
from converter.ir import Graph
from schema import FMK_TYPES

FMK_MS = next(k for k, name in FMK_TYPES.items() if name == "MS")


def load(data: bytes, source: str = "<buffer>") -> MindirSource:
    """The frontend's entry point (`converter.frontends.Frontend.load`): `source` locates external weight files."""
    return MindirSource(Model(parse(data, source), source))


class MindirSource:
    fmk_type = FMK_MS

    def __init__(self, model: Model):
        self.model = model

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        return import_model(self.model, input_shapes, weights_as_inputs)

    def float_weights(self) -> dict[str, np.ndarray]:
        return float_weights(self.model)

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        return self.model.weight_readers()
