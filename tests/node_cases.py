"""The official ONNX backend node tests as data: model, inputs and expected outputs, and the same model with its
inputs frozen as initializers (for ops whose output shape depends on input values, which compile time then
knows)."""
from __future__ import annotations

from functools import lru_cache
from typing import Iterator

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

NodeCase = tuple[str, onnx.ModelProto, list[np.ndarray], list[np.ndarray]]


@lru_cache(maxsize=1)
def _all_cases() -> tuple:
    return tuple(load_model_tests(kind="node"))


def node_cases(prefix: str) -> Iterator[NodeCase]:
    """(name, model, inputs, expected outputs) of every official node test named `test_<prefix>...`."""
    for case in _all_cases():
        if case.name.startswith(f"test_{prefix}") and case.data_sets:
            inputs, outputs = case.data_sets[0]
            yield case.name, case.model, list(inputs), list(outputs)


def frozen(model: onnx.ModelProto, inputs: list[np.ndarray]) -> onnx.ModelProto:
    """`model` with its graph inputs turned into initializers holding `inputs`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    graph.initializer.extend(numpy_helper.from_array(np.asarray(a), vi.name) for vi, a in zip(graph.input, inputs))
    del graph.input[:]
    return model
