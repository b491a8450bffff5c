"""Official MindSpore Lite training files (`converter_lite --fmk=MINDIR --trainModel=true`, 2.0.0) in TrainSession.

The fixtures in mindspore_lite_training/ are MindSpore 2.0's TrainOneStepCell exports (Momentum or SGD(0.01, 0.9),
after one step)
converted by the official converter (`train_convert.cc` says how), with MindSpore's own inference output and the
losses of its next three training steps: the file's backward and optimizer, run by our kernels, must give
MindSpore's steps.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lite.context import Context
from lite.model import Model
from lite.session import LiteSession
from lite.status import NotSupportedError
from lite.train.session import TrainSession
from schema.mindspore_lite import fb

FIXTURES = Path(__file__).with_name("mindspore_lite_training")
NETS = ("lenet_momentum", "resnet_momentum", "lenet_sgd")


def nhwc(x: np.ndarray) -> np.ndarray:
    """MindSpore's NCHW batch as the official converter's NHWC input."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1))


def relative(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.ptp(b))


@pytest.mark.parametrize("net", NETS)
def test_steps_are_mindspores(net):
    ref = np.load(FIXTURES / f"{net}.npz")
    session = TrainSession.CreateSession(str(FIXTURES / f"{net}.ms"), Context())
    session.GetInputs()[0].MutableData()[...] = nhwc(ref["x"])
    session.RunGraph()
    assert relative(session.GetPredictions()[0].MutableData(), ref["expected"]) < 1e-5
    session.Train()
    losses = []
    for x, labels in zip(ref["train_x"], ref["train_labels"]):
        data, targets = session.GetInputs()
        data.MutableData()[...] = nhwc(x)
        targets.MutableData()[...] = labels
        session.RunGraph()
        losses.append(float(session.GetOutputByTensorName("loss").MutableData()))
    np.testing.assert_allclose(losses, ref["losses"], rtol=1e-5)
    assert losses[1] != losses[0]       # the weights moved


def test_inference_session_runs_the_forward():
    ref = np.load(FIXTURES / "lenet_momentum.npz")
    session = LiteSession.CreateSession(Context())
    session.CompileGraph(Model.Load(str(FIXTURES / "lenet_momentum.ms")))
    session.GetInputs()[0].MutableData()[...] = nhwc(ref["x"])
    session.RunGraph()
    assert relative(next(iter(session.GetOutputs().values())).MutableData(), ref["expected"]) < 1e-5


def test_adam_is_refused_by_name():
    """MindSpore Lite's Adam takes beta powers the graph updates itself, which our Adam (a step count) does not:
    such a file is refused naming the node. Made here by retyping the file's ApplyMomentum primitives."""
    buf = bytearray((FIXTURES / "lenet_momentum.ms").read_bytes())
    root = fb.MetaGraph.GetRootAs(buf, 0)
    for k in range(root.NodesLength()):
        primitive = root.Nodes(k).Primitive()
        if primitive.ValueType() == fb.PrimitiveType.ApplyMomentum:
            buf[primitive._tab.Pos + primitive._tab.Offset(4)] = fb.PrimitiveType.Adam     # the union's type byte
    with pytest.raises(NotSupportedError, match="Adam-op|Adam optimizer"):
        Model.Import(bytes(buf), len(buf))
