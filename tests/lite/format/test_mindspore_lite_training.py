"""Official MindSpore Lite training files (`converter_lite --fmk=MINDIR --trainModel=true`, 2.0.0) in TrainSession.

The fixtures in mindspore_lite_training/ are MindSpore 2.0's TrainOneStepCell exports (Momentum, SGD(0.01, 0.9)
or Adam(0.001), after one step; act_lenet has Sigmoid, Tanh, HSwish and GeLU for activations) converted by the
official converter (`train_convert.cc` and `export_steps.py` say how), with MindSpore's own inference output, the
losses of its next three training steps and (the newer ones) the weights they leave: the file's backward and
optimizer, run by our kernels, must give MindSpore's steps.
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
NETS = ("lenet_momentum", "resnet_momentum", "lenet_sgd", "lenet_adam", "act_lenet_momentum")


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


@pytest.mark.parametrize("net", ["act_lenet_momentum"])
def test_weights_move_as_mindspores(net):
    """The three steps leave MindSpore's weights: each weight's change within 1 % of its largest change (float32
    cancellation of changes near 1e-7: measured 9.1e-4), so every layer's gradient is checked, also where a
    wrong one barely moves the loss (Sigmoid at conv1: a wrong slope gives 0.94)."""
    ref = np.load(FIXTURES / f"{net}.npz")
    session = TrainSession.CreateSession(str(FIXTURES / f"{net}.ms"), Context())
    before = {t.tensor_name(): t.MutableData().copy() for t in session.GetFeatureMaps()}
    session.Train()
    for x, labels in zip(ref["train_x"], ref["train_labels"]):
        data, targets = session.GetInputs()
        data.MutableData()[...] = nhwc(x)
        targets.MutableData()[...] = labels
        session.RunGraph()
    after = {t.tensor_name(): t.MutableData() for t in session.GetFeatureMaps()}
    moved = [k for k in ref.files if k.startswith("after/")]
    assert len(moved) == 8
    for key in moved:
        name = key.removeprefix("after/")
        theirs = ref[key].transpose(0, 2, 3, 1) if ref[key].ndim == 4 else ref[key]    # OIHW -> our OHWI
        change = theirs - before[name]
        assert np.abs(change).max() > 0, name
        assert np.abs(after[name] - before[name] - change).max() <= 1e-2 * np.abs(change).max(), name


def test_unknown_activation_gradient_is_refused_by_name():
    """An ActivationGrad of a type no rule maps (here the file's ReLU gradients retyped to Softsign) is refused
    naming the node."""
    buf = bytearray((FIXTURES / "lenet_momentum.ms").read_bytes())
    root = fb.MetaGraph.GetRootAs(buf, 0)
    for k in range(root.NodesLength()):
        primitive = root.Nodes(k).Primitive()
        if primitive.ValueType() == fb.PrimitiveType.ActivationGrad:
            table = fb.ActivationGrad()
            table.Init(primitive.Value().Bytes, primitive.Value().Pos)
            field = table._tab.Offset(4)     # activation_type
            assert field
            buf[table._tab.Pos + field] = fb.ActivationType.SOFTSIGN
    with pytest.raises(NotSupportedError, match="ReluGrad.*activation type 8"):
        Model.Import(bytes(buf), len(buf))
