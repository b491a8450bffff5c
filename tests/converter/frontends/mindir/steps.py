"""Training steps of a converted training model, as the MINDIR tests compare them with MindSpore's."""
from __future__ import annotations

from typing import Iterable

import numpy as np

import lite


def session_losses(buf: bytes, batches: Iterable[tuple[np.ndarray, np.ndarray]], input_name: str = "inputs0",
                   threads: int = 1) -> list[float]:
    """The losses of TrainSession steps of the training model `buf` on (input, labels) `batches`; `input_name`:
    the model's input (a training step MindSpore exported names it after TrainOneStepCell's `inputs0`)."""
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=threads), True)
    found = []
    for x, labels in batches:
        session.GetInputsByTensorName(input_name).set_data(x)
        session.GetInputsByTensorName("labels").set_data(labels)
        session.RunGraph()
        found.append(float(session.GetOutputByTensorName("loss").numpy()))
    return found
