"""MindSpore as the oracle (skipped without it): networks exported by MindSpore convert with
`converter_lite --fmk=MINDIR`, run as MindSpore runs them and train as MindSpore trains them; the committed
fixture is what MindSpore computes; our mind_ir.proto has MindSpore's fields."""
from __future__ import annotations

import numpy as np
import pytest

ms = pytest.importorskip("mindspore", reason="MindSpore is the oracle (pip install -e '.[mindir]')")
import lite  # noqa: E402
from converter.cli import main as converter_lite  # noqa: E402
from converter.frontends import read_model  # noqa: E402
from converter.frontends.mindir import mind_ir_pb2  # noqa: E402
from converter.train import TrainParams  # noqa: E402
from tests.converter.frontends.mindir.oracle import (FIXTURES, OPTIMIZERS, STEPS, export,  # noqa: E402
                                                     export_step, mindir, network, training_batches,
                                                     training_losses)
from tests.converter.frontends.mindir.steps import session_losses  # noqa: E402
from tests.util import relative_to_range, run_lite  # noqa: E402


def converted(tmp_path, source, *flags: str) -> bytes:
    assert converter_lite(["--fmk=MINDIR", f"--modelFile={source}", f"--outputFile={tmp_path / 'model'}",
                           *flags]) == lite.RET_OK
    return (tmp_path / "model.ms").read_bytes()


@pytest.mark.parametrize("key", ["lenet", "resnet", "mobilenetv2", "primitives", "more_primitives", "attention",
                                 "elementwise", "upsampler", "recurrent", "gru", "resizes"])
def test_inference_matches_mindspore(key, tmp_path):
    source, x, want = export(key, tmp_path)
    buf = converted(tmp_path, source)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=2))
    got = next(iter(run_lite(session, {"x": x}).values()))
    assert got.shape == want.shape and relative_to_range(got, want) <= 1e-4


def test_the_committed_fixtures_are_what_mindspore_computes():
    """MindSpore loads the files committed for its version and computes the committed outputs from the committed
    inputs."""
    fixtures = sorted((FIXTURES / f"mindspore-{ms.__version__}").glob("*.mindir"))
    if not fixtures:
        pytest.skip(f"no fixtures are committed for MindSpore {ms.__version__}")
    for fixture in fixtures:
        data = np.load(fixture.with_suffix(".npz"))
        graph = ms.nn.GraphCell(ms.load(str(fixture)))
        if fixture.stem in STEPS:       # a training step: its loss on the first batch (its weights updated)
            loss = graph(ms.Tensor(data["train_x"][0]), ms.Tensor(data["train_labels"][0])).asnumpy()
            np.testing.assert_allclose(loss, data["losses"][0], rtol=1e-5, err_msg=fixture.name)
            continue
        np.testing.assert_allclose(graph(ms.Tensor(data["x"])).asnumpy(), data["expected"], rtol=1e-5, atol=1e-6,
                                   err_msg=fixture.name)


@pytest.mark.parametrize("key", ["lenet", "resnet"])
def test_first_training_losses_are_mindspores(key, tmp_path):
    """`--trainModel=true --optimizer=momentum --learningRate=0.01` against MindSpore's TrainOneStepCell with
    Momentum(0.01, 0.9) and sparse softmax cross entropy, over three batches (ResNet: BatchNorm on batch
    statistics, its running statistics updated)."""
    batches = training_batches(key)
    source = tmp_path / f"{key}.mindir"
    mindir(network(key), source.with_suffix(""), ms.Tensor(batches[0][0]))
    buf = converted(tmp_path, source, "--trainModel=true", "--optimizer=momentum", "--learningRate=0.01")
    np.testing.assert_allclose(session_losses(buf, batches, "x", threads=2), training_losses(key, batches),
                               rtol=1e-4)


def _fields(file) -> dict[str, list[tuple[str, int, int, bool]]]:
    """Every message of a generated module by its name inside the package: its fields' names, numbers, types
    and whether they repeat."""
    found, stack = {}, list(file.message_types_by_name.values())
    while stack:
        message = stack.pop()
        stack += message.nested_types
        found[message.full_name.removeprefix(file.package + ".")] = sorted(
            (f.name, f.number, f.type, f.is_repeated) for f in message.fields)
    return found


def test_our_proto_has_mindspores_fields():
    from mindspore.train import mind_ir_pb2 as theirs
    assert _fields(mind_ir_pb2.DESCRIPTOR) == _fields(theirs.DESCRIPTOR)


def test_a_branch_on_a_run_time_value_takes_the_branch_mindspore_takes(tmp_path):
    """`if x.sum() > 0` becomes our If: the converted model follows MindSpore into either branch."""
    source, x, _ = export("branches", tmp_path)
    graph = read_model("MINDIR", source).to_ir()
    assert [n.op for n in graph.nodes].count("If") == 1
    buf = converted(tmp_path, source)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    net = network("branches")
    for sample in (np.abs(x), -np.abs(x)):
        got = next(iter(run_lite(session, {"x": sample}).values()))
        assert relative_to_range(got, net(ms.Tensor(sample)).asnumpy()) <= 1e-4


def test_a_loop_of_run_time_count_iterates_as_often_as_mindspores(tmp_path):
    """`while |y|.sum() < 20: y = tanh(fc(y)) * 2 + y` becomes our Loop: inputs needing many, few and no
    iterations give MindSpore's results."""
    source, x, _ = export("loop", tmp_path)
    assert [n.op for n in read_model("MINDIR", source).to_ir().nodes].count("Loop") == 1
    buf = converted(tmp_path, source)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    (name,) = [t.tensor_name() for t in session.GetInputs()]   # MindSpore names it after `y = x`
    net = network("loop")
    for sample in (x * 0.01, x, x * 10):
        got = next(iter(run_lite(session, {name: sample}).values()))
        assert relative_to_range(got, net(ms.Tensor(sample)).asnumpy()) <= 1e-4


OPTIMIZERS.setdefault("momentum_decay", lambda params: ms.nn.Momentum(params, 0.01, 0.9, weight_decay=0.01))


@pytest.mark.parametrize("key, optimizer", [("lenet", "momentum"), ("lenet", "adam"), ("resnet", "momentum"),
                                            ("lenet", "momentum_decay"), ("resnet", "momentum_decay")])
def test_an_exported_training_step_trains_as_mindspores(key, optimizer, tmp_path):
    """MindSpore's TrainOneStepCell exported after one step (the optimizer state it holds carried over), converted
    with `--trainModel=true`: the next three losses are MindSpore's (Momentum(0.01, 0.9), with weight decay 0.01,
    or Adam(0.001); ResNet: BatchNorm on batch statistics, its gamma and beta not decayed, MindSpore's default)."""
    STEPS[f"{key}_{optimizer}"] = (key, optimizer)
    source, data = export_step(f"{key}_{optimizer}", tmp_path)
    buf = converted(tmp_path, source, "--trainModel=true")
    np.testing.assert_allclose(session_losses(buf, zip(data["train_x"], data["train_labels"]), threads=2),
                               data["losses"], rtol=1e-4)


def test_a_training_step_with_one_hot_labels_trains_as_mindspores(tmp_path):
    """nn.SoftmaxCrossEntropyWithLogits(sparse=False, reduction='mean'): the batch mean of
    SoftmaxCrossEntropyWithLogits, read as our loss on one-hot labels."""
    net = network("narrow_lenet")
    loss = ms.nn.SoftmaxCrossEntropyWithLogits(sparse=False, reduction="mean")
    step = ms.nn.TrainOneStepCell(ms.nn.WithLossCell(net, loss), OPTIMIZERS["momentum"](net.trainable_params()))
    step.set_train(True)
    batches = [(x, np.eye(10, dtype=np.float32)[labels]) for x, labels in training_batches("narrow_lenet")]
    source = mindir(step, tmp_path / "step", *(ms.Tensor(a) for a in batches[0]))
    params, _ = read_model("MINDIR", source).training(TrainParams())
    assert params.labels == "onehot"
    buf = converted(tmp_path, source, "--trainModel=true")
    want = [float(step(ms.Tensor(x), ms.Tensor(y)).asnumpy()) for x, y in batches]
    np.testing.assert_allclose(session_losses(buf, batches), want, rtol=1e-4)
