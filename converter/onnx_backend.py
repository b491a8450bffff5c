"""An `onnx.backend` implementation over the converter and the runtime, for the ONNX conformance suite.

`prepare` converts the model in memory and creates a session; `run` feeds the inputs (resizing when their
shapes differ from the model's) and returns copies of the outputs in graph order.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

import lite
from converter import convert


class LiteBackendRep(BackendRep):
    def __init__(self, session: lite.LiteSession, input_names: list[str], output_names: list[str]):
        self.session = session
        self.input_names = input_names
        self.output_names = output_names

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            arrays = [np.asarray(inputs[n]) for n in self.input_names]
        else:
            arrays = [np.asarray(a) for a in (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        tensors = [self.session.GetInputsByTensorName(n) for n in self.input_names]
        if any(t.shape() != list(a.shape) for t, a in zip(tensors, arrays)):
            self.session.Resize(tensors, [list(a.shape) for a in arrays])
        for t, a in zip(tensors, arrays):
            t.set_data(a)
        self.session.RunGraph()
        return tuple(self.session.GetOutputByTensorName(n).numpy() for n in self.output_names)


class LiteBackend(Backend):
    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs: Any) -> LiteBackendRep:
        super().prepare(model, device, **kwargs)
        buf = convert(model)
        session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
        initializers = {i.name for i in model.graph.initializer}
        inputs = [i.name for i in model.graph.input if i.name not in initializers]
        return LiteBackendRep(session, inputs, [o.name for o in model.graph.output])

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = LiteBackend.prepare
run_model = LiteBackend.run_model
supports_device = LiteBackend.supports_device
