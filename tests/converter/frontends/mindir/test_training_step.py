"""MindSpore's exported training steps without MindSpore: `TrainOneStepCell(WithLossCell(net, sparse softmax cross
entropy), Momentum(0.01, 0.9) | Adam(0.001))` of a LeNet and of a ResNet with BatchNorm, each exported by
MindSpore 2.10 (the ResNet's by 2.0 too, arguments as attributes) after one step, so that it holds optimizer state,
convert with `converter_lite --fmk=MINDIR --trainModel=true` into a model whose TrainSession loses what MindSpore
lost on the next three steps; what the file fixes is read from it; what it does that cannot be reproduced is refused
naming primitive and node."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lite
from converter import convert_for_training
from converter.cli import main as converter_lite
from converter.frontends import read_model
from converter.frontends.mindir import mind_ir_pb2 as pb
from converter.train import TrainParams
from tests.converter.frontends.mindir.steps import session_losses
from tests.util import relative_to_range, run_lite, session_for

FIXTURES = Path(__file__).resolve().with_name("fixtures") / "mindspore-2.10.0"
STEPS = sorted(FIXTURES.parent.glob("*/step_*.mindir"))      # 2.10 and (arguments as attributes) 2.0
LENET = FIXTURES / "step_lenet_momentum.mindir"


def losses(buf: bytes, fixture: Path) -> list[float]:
    """The TrainSession losses of the training model `buf` on the batches committed with `fixture`."""
    data = np.load(fixture.with_suffix(".npz"))
    return session_losses(buf, zip(data["train_x"], data["train_labels"]))


def edited(tmp_path: Path, edit) -> Path:
    model = pb.ModelProto.FromString(LENET.read_bytes())
    edit(model)
    path = tmp_path / "edited.mindir"
    path.write_bytes(model.SerializeToString())
    return path


@pytest.mark.parametrize("fixture", STEPS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_a_training_step_trains_as_mindspore_trained_it(fixture, tmp_path, capsys):
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={fixture}", f"--outputFile={tmp_path / 'step'}",
                           "--trainModel=true"]) == lite.RET_OK
    assert "CONVERT RESULT SUCCESS:0" in capsys.readouterr().out
    np.testing.assert_allclose(losses((tmp_path / "step.ms").read_bytes(), fixture),
                               np.load(fixture.with_suffix(".npz"))["losses"], rtol=1e-5)


def test_the_optimizer_and_its_hyper_parameters_are_read_from_the_file():
    momentum, adam = (read_model("MINDIR", FIXTURES / f"step_lenet_{o}.mindir") for o in ("momentum", "adam"))
    params, start = momentum.training(TrainParams())
    assert (params.optimizer, params.learning_rate, params.momentum, params.loss) == \
        ("momentum", 0.01, 0.9, "softmax_cross_entropy")
    assert sorted(params.trainable) == sorted(w.replace(".", r"\.") for w in momentum.float_weights())
    assert set(start.state) == {f"{w}/accum" for w in momentum.float_weights()} and not start.weight_decay
    params, start = adam.training(TrainParams())
    assert (params.optimizer, params.learning_rate, params.beta1, params.beta2, params.epsilon) == \
        ("adam", 0.001, 0.9, 0.999, 1e-8)
    assert start.state["conv1.weight/step"] == 1    # exported after one step


def test_without_the_carried_optimizer_state_the_losses_differ():
    """The accumulators MindSpore held at export matter: started from zeros, the next losses are not MindSpore's
    (so the test above checks that they are carried over)."""
    model = read_model("MINDIR", LENET)
    model.step.start.state = {}
    assert not np.allclose(losses(convert_for_training(model, TrainParams()), LENET),
                           np.load(LENET.with_suffix(".npz"))["losses"], rtol=1e-4)


def test_converted_for_inference_a_training_step_is_its_network():
    """The file's forward network alone, its BatchNorm on the moving statistics: MindSpore's inference output for
    the committed input."""
    for fixture in (LENET, FIXTURES / "step_resnet_momentum.mindir"):
        model = read_model("MINDIR", fixture)
        graph = model.to_ir()
        assert graph.inputs == ["inputs0"] and len(graph.outputs) == 1
        data = np.load(fixture.with_suffix(".npz"))
        got = next(iter(run_lite(session_for(model), {"inputs0": data["x"]}).values()))
        assert relative_to_range(got, data["expected"]) <= 1e-5


def test_a_flag_contradicting_the_file_is_refused_and_one_agreeing_is_accepted(tmp_path, capsys):
    out = str(tmp_path / "step")
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={LENET}", f"--outputFile={out}", "--trainModel=true",
                           "--optimizer=adam"]) == lite.RET_PARAM_INVALID
    assert "train parameter 'optimizer': 'adam' differs from the 'momentum' of the training step" in \
        capsys.readouterr().err
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={LENET}", f"--outputFile={out}", "--trainModel=true",
                           "--optimizer=momentum", "--learningRate=0.01"]) == lite.RET_OK


def test_an_optimizer_update_that_cannot_be_mapped_is_refused_naming_it(tmp_path):
    def adagrad(model):
        next(p for p in model.primitives if p.op_type == "ApplyMomentum").op_type = "ApplyAdagrad"
    with pytest.raises(lite.NotSupportedError, match=r"'.*edited\.mindir' is a training step whose ApplyAdagrad "
                                                     r"at node 'success:\d+' is an optimizer update that is not "
                                                     r"supported"):
        read_model("MINDIR", edited(tmp_path, adagrad))


def test_a_loss_that_cannot_be_mapped_is_refused_naming_it(tmp_path):
    def other_loss(model):
        for p in model.primitives:
            if p.op_type == "SparseSoftmaxCrossEntropyWithLogits" and \
                    not any(a.name == "is_grad" and a.i for a in p.attribute):
                p.op_type = "BCEWithLogitsLoss"
    with pytest.raises(lite.NotSupportedError, match=r"training step whose loss is 'BCEWithLogitsLoss' at node "
                                                     r"'.*': only nn.SoftmaxCrossEntropyWithLogits"):
        read_model("MINDIR", edited(tmp_path, other_loss))


def test_a_learning_rate_schedule_is_refused_naming_the_update(tmp_path):
    """A learning rate computed at run time (a schedule computes it from the global step) is not a fixed value:
    here the updates read the loss as their learning rate."""
    def schedule(model):
        prims = {p.name: p.op_type for p in model.primitives}
        loss = next(n for n in model.graph.node if prims.get(n.op_type[5:]) == "SparseSoftmaxCrossEntropyWithLogits")
        for node in model.graph.node:
            if prims.get(node.op_type[5:]) == "ApplyMomentum":
                node.input[2] = loss.output[0]
    with pytest.raises(lite.NotSupportedError, match=r"ApplyMomentum at node 'success:\d+' reads a learning rate "
                                                     r"computed by SparseSoftmaxCrossEntropyWithLogits at node '.*' "
                                                     r"\(a schedule\?\): only a fixed value is supported"):
        read_model("MINDIR", edited(tmp_path, schedule))
