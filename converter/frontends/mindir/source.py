"""A MINDIR model as the converter's source (`converter.frontends.SourceModel`): parsed once, imported into IR,
its float parameters the weights a training graph trains. A training step MindSpore exported (TrainOneStepCell)
is its network, plus the training the file fixes (`training`)."""
from __future__ import annotations

import dataclasses
import math
from typing import Collection

import numpy as np

from converter.frontends.mindir.importer import Model, float_weights, import_model
from converter.frontends.mindir.reader import parse
from converter.frontends.mindir.training import TrainingStep, is_training_step, recognise
from converter.ir import Graph
from converter.train.builder import OptimizerStart
from converter.train.config import TrainParams
from lite.status import ParamInvalidError
from schema import FMK_TYPES

FMK_MS = next(k for k, name in FMK_TYPES.items() if name == "MS")


def load(data: bytes, source: str = "<buffer>") -> MindirSource:
    """The frontend's entry point (`converter.frontends.Frontend.load`): `source` locates external weight files."""
    model = Model(parse(data, source), source)
    if not is_training_step(model):
        return MindirSource(model)
    step = recognise(model)
    return MindirSource(Model(step.forward, source), step)


class MindirSource:
    fmk_type = FMK_MS

    def __init__(self, model: Model, step: TrainingStep | None = None):
        self.model, self.step = model, step

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        return import_model(self.model, input_shapes, weights_as_inputs)

    def float_weights(self) -> dict[str, np.ndarray]:
        return float_weights(self.model)

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        return self.model.weight_readers()

    def training(self, params: TrainParams) -> tuple[TrainParams, OptimizerStart]:
        """(`params` with what a training step's file fixes, where its optimizer starts). A setting given that
        differs from the file's is a ParamInvalidError naming both; one the file leaves open (freeze, output) is
        kept."""
        if self.step is None:
            return params, OptimizerStart()
        defaults = TrainParams()
        implied = TrainParams(optimizer=params.optimizer).momentum       # the default momentum of the optimizer given
        for key, value in self.step.settings.items():
            given = getattr(params, key)
            unset = _same(given, getattr(defaults, key)) or key == "momentum" and _same(given, implied)
            if not unset and not _same(given, value):
                raise ParamInvalidError(f"train parameter '{key}': {given!r} differs from the {value!r} of the "
                                        f"training step in '{self.model.source}' ({self.step.optimizer}): leave it "
                                        f"out or give the file's")
        return dataclasses.replace(params, **self.step.settings), self.step.start


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)
    return a == b
