"""Training checkpoints: the training model with its variables' current values and the global step, so that
save -> load -> continue reproduces uninterrupted training."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from lite import dtypes
from lite.model import Model, TensorDef
from lite.variables import model_bytes
from schema import fb
from schema.train_format import GLOBAL_STEP


def checkpoint_bytes(model: Model, tensors: list[TensorDef], step: int) -> bytes:
    """`model` as `.ms` bytes with `tensors` (the variables carrying their current values, a streaming model's
    state as `lite.variables.with_state` stores it) and the `global_step` tensor set to `step`."""
    tensors = list(tensors)
    value = np.array(step, np.int64)
    existing = next((t for t in tensors if t.name == GLOBAL_STEP), None)
    if existing is not None:
        tensors[existing.index] = replace(existing, data=value)
    else:
        tensors.append(TensorDef(len(tensors), GLOBAL_STEP, fb.NodeType.VALUE, dtypes.DataType.INT64, (),
                                 fb.Format.ND, value))
    return model_bytes(model, tensors)


def stored_step(model: Model) -> int:
    """The global step a checkpoint was saved at (0 for a fresh model)."""
    t = next((t for t in model.tensors if t.name == GLOBAL_STEP and t.is_const), None)
    return int(t.data) if t is not None else 0
