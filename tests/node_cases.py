"""The official ONNX backend node tests as data: model, inputs and expected outputs, and the same model with its
inputs frozen as initializers (for ops whose output shape depends on input values, which compile time then
knows)."""
from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Iterator

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.test.loader import load_model_tests

NodeCase = tuple[str, onnx.ModelProto, list[np.ndarray], list[np.ndarray]]


@lru_cache(maxsize=1)
def _all_cases() -> tuple:
    with warnings.catch_warnings():     # generating the cases computes some on purpose-overflowing values
        warnings.simplefilter("ignore")
        return tuple(load_model_tests(kind="node"))


def node_cases(prefix: str) -> Iterator[NodeCase]:
    """(name, model, inputs, expected outputs) of every official node test named `test_<prefix>...`."""
    for case in _all_cases():
        if case.name.startswith(f"test_{prefix}") and case.data_sets:
            inputs, outputs = case.data_sets[0]
            yield case.name, case.model, list(inputs), list(outputs)


def frozen(model: onnx.ModelProto, inputs: list[np.ndarray], keep: int = 0) -> onnx.ModelProto:
    """`model` with its graph inputs after the first `keep` turned into initializers holding `inputs`."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    graph.initializer.extend(numpy_helper.from_array(np.asarray(a), vi.name)
                             for vi, a in list(zip(graph.input, inputs))[keep:])
    del graph.input[keep:]
    return model


def run_case(model: onnx.ModelProto, inputs: list[np.ndarray], keep: int = 0) -> list[np.ndarray]:
    """Our outputs, in graph order, of `model` with all but its first `keep` inputs frozen as constants."""
    from tests.util import run_lite, session_for
    model = frozen(model, inputs, keep)
    outputs = run_lite(session_for(model), {vi.name: a for vi, a in zip(model.graph.input, inputs)})
    return [outputs[o.name] for o in model.graph.output]
