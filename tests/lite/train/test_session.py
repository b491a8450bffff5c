"""`lite.TrainSession`: training steps, modes, weights/gradients API, virtual batches, checkpoints, exports,
transfer learning and bad input. Oracles: PyTorch autograd and torch.optim on the same weights.

Most behaviours are checked on `tiny_model`, a hand-built training graph in the docs/training.md format
(logits = x * w + b, sparse softmax cross-entropy, Sgd with momentum or Adam); the end-to-end checks use
LeNet-5 and ResNet-18 from the model zoo converted with `converter.convert_for_training`.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import lite
import models
from converter import convert, convert_for_training
from converter.export import to_bytes
from converter.ir import Graph, Node, SubGraph, Value
from converter.train import TrainParams
from lite.session import KernelCallBack
from lite.train.session import named
from tests.oracles.torch_reference import to_torch

N, C = 4, 3


def tiny_model(n: int = N, c: int = C, optimizer: str = "Sgd", lr: float = 0.1, seed: int = 0) -> bytes:
    """A training `.ms` of logits = x * w + b (x [n, c], w and b [c]) with sparse softmax cross-entropy and one
    optimizer node per weight: "Sgd" (momentum 0.9) or "Adam"."""
    g = Graph("tiny")
    rng = np.random.default_rng(seed)

    def value(name: str, shape: tuple[int, ...], dtype: type = np.float32) -> str:
        g.values[name] = Value(name, shape, np.dtype(dtype))
        return name

    x, labels = value("input", (n, c)), value("labels", (n,), np.int32)
    w = g.add_const(rng.standard_normal(c).astype(np.float32), "w")
    b = g.add_const(rng.standard_normal(c).astype(np.float32), "b")
    lr_t = g.add_const(np.array(lr, np.float32), "learning_rate")
    for name in ("xw", "logits", "xw_t", "logits_t", "dlogits", "dxw", "dx"):
        value(name, (n, c))
    value("loss", ())
    value("w/grad", (c,))
    value("b/grad", (c,))
    ev = [Node("Mul", "mul", [x, w], ["xw"]), Node("Add", "add", ["xw", b], ["logits"])]
    gr = [Node("Mul", "mul_t", [x, w], ["xw_t"]), Node("Add", "add_t", ["xw_t", b], ["logits_t"]),
          Node("SparseSoftmaxCrossEntropyWithLogits", "loss", ["logits_t", labels], ["loss", "dlogits"]),
          Node("AddGrad", "add_grad", ["dlogits", "xw_t", b], ["dxw", "b/grad"]),
          Node("MulGrad", "mul_grad", ["dxw", x, w], ["dx", "w/grad"])]
    opt = []
    for p in (w, b):
        zeros = np.zeros(c, np.float32)
        if optimizer == "Sgd":
            state = [g.add_const(zeros, f"{p}/accum"), g.add_const(np.array(1, np.float32), f"{p}/stat")]
            opt.append(Node("Sgd", f"{p}/sgd", [p, f"{p}/grad", lr_t, *state], [], {"momentum": 0.9}))
        else:
            state = [g.add_const(zeros, f"{p}/m"), g.add_const(zeros, f"{p}/v"),
                     g.add_const(np.array(0, np.float32), f"{p}/step")]
            opt.append(Node("Adam", f"{p}/adam", [p, *state, lr_t, f"{p}/grad"], []))
    g.nodes = ev + gr + opt
    g.inputs, g.outputs = [x, labels], ["loss", "logits_t"]
    g.subgraphs = [SubGraph("eval", [x], ["logits"], ev),
                   SubGraph("gradients", [x, labels], ["loss", "logits_t", "w/grad", "b/grad"], gr),
                   SubGraph("optimizer", ["w/grad", "b/grad"], [], opt)]
    return to_bytes(g)


def tiny_batch(n: int = N, c: int = C, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, c)).astype(np.float32), rng.integers(0, c, n).astype(np.int32)


def open_session(buf: bytes, train: bool = True) -> lite.TrainSession:
    return lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1), train)


def feed(session: lite.TrainSession, x: np.ndarray, labels: np.ndarray | None = None) -> None:
    session.GetInputsByTensorName("input").set_data(x)
    if labels is not None:
        session.GetInputsByTensorName("labels").set_data(labels)


def weights(session: lite.TrainSession) -> dict[str, np.ndarray]:
    return named(session.GetFeatureMaps())


def torch_tiny(session: lite.TrainSession) -> dict[str, torch.Tensor]:
    return {k: torch.tensor(v, requires_grad=True) for k, v in weights(session).items()}


def torch_loss(p: dict[str, torch.Tensor], x: np.ndarray, labels: np.ndarray) -> torch.Tensor:
    return F.cross_entropy(torch.from_numpy(x) * p["w"] + p["b"], torch.from_numpy(labels).long())


def assert_close(actual: np.ndarray, expected: np.ndarray, tol: float = 1e-5) -> None:
    """Norm-wise relative error max|a - e| / max|e|."""
    scale = max(float(np.abs(expected).max()), 1e-12)
    assert float(np.abs(actual.astype(np.float64) - expected).max()) / scale <= tol


# ---- one step ---------------------------------------------------------------------------------------------------
def test_first_step_loss_and_gradients_equal_torch_autograd() -> None:
    session = open_session(tiny_model())
    x, labels = tiny_batch()
    p = torch_tiny(session)
    feed(session, x, labels)
    session.RunGraph()
    loss = torch_loss(p, x, labels)
    loss.backward()
    assert_close(session.GetOutputByTensorName("loss").numpy(), loss.detach().numpy())
    grads = named(session.GetGradients())
    for name, param in p.items():
        assert_close(grads[name], param.grad.numpy())


@pytest.mark.parametrize("optimizer", ["Sgd", "Adam"])
def test_steps_follow_torch_optim(optimizer: str) -> None:
    session = open_session(tiny_model(optimizer=optimizer, lr=0.05))
    p = torch_tiny(session)
    opt = (torch.optim.SGD(p.values(), lr=0.05, momentum=0.9) if optimizer == "Sgd"
           else torch.optim.Adam(p.values(), lr=0.05))
    for step in range(4):
        x, labels = tiny_batch(seed=step)
        feed(session, x, labels)
        session.RunGraph()
        opt.zero_grad()
        torch_loss(p, x, labels).backward()
        opt.step()
    for name, value in weights(session).items():
        assert_close(value, p[name].detach().numpy())


def test_callback_returning_false_stops_the_step_before_the_update() -> None:
    session = open_session(tiny_model())
    feed(session, *tiny_batch())
    before = weights(session)
    status = session.RunGraph(after=lambda ins, outs, param: param.node_type != "SparseSoftmaxCrossEntropyWithLogits")
    assert status == lite.RET_SUCCESS_EXIT
    for name, value in weights(session).items():
        np.testing.assert_array_equal(value, before[name])


# ---- modes ------------------------------------------------------------------------------------------------------
def test_modes_switch_inputs_and_outputs() -> None:
    session = open_session(tiny_model(), train=False)
    assert session.IsEval() and not session.IsTrain()
    assert [t.tensor_name() for t in session.GetInputs()] == ["input"]
    assert session.GetOutputTensorNames() == ["logits"]
    session.Train()
    assert session.IsTrain() and not session.IsEval()
    assert [t.tensor_name() for t in session.GetInputs()] == ["input", "labels"]
    assert session.GetOutputTensorNames() == ["loss", "logits_t"]
    assert [t.tensor_name() for t in session.GetPredictions()] == ["logits_t"]


def test_eval_runs_the_forward_on_the_data_set_in_train_mode() -> None:
    session = open_session(tiny_model())
    x, labels = tiny_batch()
    feed(session, x, labels)
    session.Eval()
    before = weights(session)
    session.RunGraph()
    expected = x * before["w"] + before["b"]
    np.testing.assert_allclose(session.GetPredictions()[0].numpy(), expected, rtol=1e-6)
    for name, value in weights(session).items():
        np.testing.assert_array_equal(value, before[name])


def test_learning_rate_is_read_and_set() -> None:
    session = open_session(tiny_model(lr=0.25))
    assert session.GetLearningRate() == 0.25
    session.SetLearningRate(0.0)
    feed(session, *tiny_batch())
    before = weights(session)
    session.RunGraph()
    for name, value in weights(session).items():
        np.testing.assert_array_equal(value, before[name])
    with pytest.raises(lite.ParamInvalidError, match="finite"):
        session.SetLearningRate(float("nan"))


# ---- weights, gradients, optimizer state --------------------------------------------------------------------------
def test_apply_gradients_equals_a_training_step() -> None:
    x, labels = tiny_batch()
    stepped, applied = open_session(tiny_model()), open_session(tiny_model())
    feed(stepped, x, labels)
    stepped.RunGraph()
    grads = named(stepped.GetGradients())
    applied.ApplyGradients([(name, g) for name, g in grads.items()])
    for name, value in weights(applied).items():
        np.testing.assert_array_equal(value, weights(stepped)[name])


def test_apply_gradients_needs_one_per_weight() -> None:
    session = open_session(tiny_model())
    with pytest.raises(lite.InputTensorError, match="no value given for w"):
        session.ApplyGradients([("b", np.zeros(C, np.float32))])


def test_update_feature_maps_sets_weights_and_checks_them() -> None:
    session = open_session(tiny_model())
    session.UpdateFeatureMaps([("w", np.full(C, 2, np.float32))])
    np.testing.assert_array_equal(weights(session)["w"], np.full(C, 2, np.float32))
    with pytest.raises(lite.InputTensorError, match="'nope' is not one"):
        session.UpdateFeatureMaps([("nope", np.zeros(C, np.float32))])
    with pytest.raises(lite.InputTensorError, match="expects shape"):
        session.UpdateFeatureMaps([("w", np.zeros(C + 1, np.float32))])


def test_eval_follows_weights_set_while_in_eval_mode() -> None:
    """Eval runs a plan of the weights as constants: a weight set by UpdateFeatureMaps, or written through the
    tensor GetFeatureMaps gave, is read by the next run."""
    session = open_session(tiny_model(), train=False)
    x = tiny_batch()[0]
    feed(session, x)
    session.RunGraph()
    w, b = weights(session)["w"], weights(session)["b"]
    np.testing.assert_allclose(session.GetPredictions()[0].numpy(), x * w + b, rtol=1e-6)
    session.UpdateFeatureMaps([("w", np.full(C, 2, np.float32))])
    session.RunGraph()
    np.testing.assert_allclose(session.GetPredictions()[0].numpy(), x * 2 + b, rtol=1e-6)
    next(t for t in session.GetFeatureMaps() if t.tensor_name() == "b").MutableData()[...] = -1
    session.RunGraph()
    np.testing.assert_allclose(session.GetPredictions()[0].numpy(), x * 2 - 1, rtol=1e-6)


def test_optimizer_params_hold_learning_rate_and_state() -> None:
    session = open_session(tiny_model(lr=0.1))
    feed(session, *tiny_batch())
    session.RunGraph()
    params = named(session.GetOptimizerParams())
    assert set(params) == {"learning_rate", "w/accum", "w/stat", "b/accum", "b/stat"}
    np.testing.assert_array_equal(params["w/accum"], named(session.GetGradients())["w"])
    session.SetOptimizerParams([("learning_rate", np.full(params["learning_rate"].shape, 0.5, np.float32)),
                                ("w/accum", np.ones(C, np.float32))])
    assert session.GetLearningRate() == 0.5
    np.testing.assert_array_equal(named(session.GetOptimizerParams())["w/accum"], np.ones(C, np.float32))


# ---- virtual batches ----------------------------------------------------------------------------------------------
def test_virtual_batch_equals_one_step_on_the_whole_batch() -> None:
    x, labels = tiny_batch(n=2 * N)
    whole = open_session(tiny_model())
    whole.Resize(whole.GetInputs()[:1], [[2 * N, C]])      # labels follow the batch
    feed(whole, x, labels)
    whole.RunGraph()
    virtual = open_session(tiny_model())
    virtual.SetupVirtualBatch(2)
    start = weights(virtual)
    for half in (slice(0, N), slice(N, 2 * N)):
        feed(virtual, x[half], labels[half])
        virtual.RunGraph()
        if half.start == 0:
            for name, value in weights(virtual).items():
                np.testing.assert_array_equal(value, start[name])
    for name, value in weights(virtual).items():
        assert_close(value, weights(whole)[name], 1e-6)


# ---- checkpoints and exports ------------------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["Sgd", "Adam"])
def test_checkpoint_resumes_exactly(tmp_path: Path, optimizer: str) -> None:
    batches = [tiny_batch(seed=k) for k in range(6)]
    straight, resumed = straight_and_resumed(tiny_model(optimizer=optimizer), batches, tmp_path / "ckpt.ms")
    for name, value in weights(resumed).items():
        np.testing.assert_array_equal(value, weights(straight)[name])


def test_inference_export_runs_in_a_lite_session_like_eval(tmp_path: Path) -> None:
    session = open_session(tiny_model())
    x, labels = tiny_batch()
    feed(session, x, labels)
    session.RunGraph()
    session.Eval()
    session.RunGraph()
    session.Export(tmp_path / "inference.ms", lite.MT_INFERENCE)
    model = lite.Model.Load(tmp_path / "inference.ms")
    assert model.subgraphs == {} and {n.op for n in model.nodes} == {"Mul", "Add"}
    plain = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    plain.CompileGraph(model)
    plain.GetInputs()[0].set_data(x)
    plain.RunGraph()
    np.testing.assert_array_equal(plain.GetOutputByTensorName("logits").numpy(),
                                  session.GetOutputByTensorName("logits").numpy())


def test_saving_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = open_session(tiny_model())
    path = tmp_path / "ckpt.ms"
    session.SaveToFile(path)
    saved = path.read_bytes()
    monkeypatch.setattr("lite.atomic_file.os.replace", lambda *a: (_ for _ in ()).throw(OSError("disk full")))
    feed(session, *tiny_batch())
    session.RunGraph()
    with pytest.raises(OSError):
        session.SaveToFile(path)
    assert path.read_bytes() == saved and [p.name for p in tmp_path.iterdir()] == ["ckpt.ms"]


# ---- bad input --------------------------------------------------------------------------------------------------
def test_labels_out_of_range_are_an_input_tensor_error() -> None:
    session = open_session(tiny_model())
    x, labels = tiny_batch()
    labels[0] = C
    feed(session, x, labels)
    with pytest.raises(lite.InputTensorError, match="labels"):
        session.RunGraph()


def test_labels_of_the_wrong_shape_are_an_input_tensor_error() -> None:
    session = open_session(tiny_model())
    with pytest.raises(lite.InputTensorError, match="labels"):
        session.GetInputsByTensorName("labels").set_data(np.zeros(N + 1, np.int32))


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_non_finite_loss_is_reported_and_the_weights_are_kept() -> None:
    session = open_session(tiny_model())
    x, labels = tiny_batch()
    x[0, 0] = np.inf
    feed(session, x, labels)
    before = weights(session)
    with pytest.raises(lite.NonFiniteLossError, match="loss") as error:
        session.RunGraph()
    assert error.value.status == lite.RET_OP_EXECUTE_FAILURE
    for name, value in weights(session).items():
        np.testing.assert_array_equal(value, before[name])


def test_training_calls_on_an_inference_model_are_not_supported(tmp_path: Path) -> None:
    session = open_session(tiny_model())
    session.Export(tmp_path / "inference.ms", lite.MT_INFERENCE)
    inference = lite.TrainSession.CreateSession(str(tmp_path / "inference.ms"), lite.Context(thread_num=1))
    for call in (inference.Train, lambda: inference.SetLearningRate(0.1), inference.GetGradients,
                 lambda: inference.SetupVirtualBatch(2)):
        with pytest.raises(lite.NotSupportedError, match="no 'gradients'"):
            call()
    inference.GetInputs()[0].set_data(tiny_batch()[0])
    assert inference.RunGraph() == lite.RET_OK


# ---- real models: LeNet-5 and ResNet-18 from the zoo, a Dropout MLP, transfer learning ------------------------------
BATCH, SIZE, CLASSES = 4, 32, 10


@functools.lru_cache(maxsize=None)
def zoo(name: str) -> onnx.ModelProto:
    return models.build(name, num_classes=CLASSES, input_size=SIZE, batch=BATCH)


@functools.lru_cache(maxsize=None)
def zoo_training(name: str, optimizer: str = "momentum") -> bytes:
    return convert_for_training(zoo(name), TrainParams(optimizer=optimizer, learning_rate=0.01))


def zoo_batch(name: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    channels = zoo(name).graph.input[0].type.tensor_type.shape.dim[1].dim_value
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((BATCH, channels, SIZE, SIZE)).astype(np.float32),
            rng.integers(0, CLASSES, BATCH).astype(np.int32))


def torch_module(model: onnx.ModelProto) -> torch.nn.Module:
    """The PyTorch oracle: the same ONNX weights in float64, in train mode."""
    return to_torch(model).double().train()


def torch_loss_of(module: torch.nn.Module, x: np.ndarray, labels: np.ndarray) -> torch.Tensor:
    return F.cross_entropy(module(torch.from_numpy(x).double()), torch.from_numpy(labels).long())


def eval_logits(session: lite.TrainSession, x: np.ndarray) -> np.ndarray:
    session.Eval()
    feed(session, x)
    session.RunGraph()
    logits = session.GetPredictions()[0].numpy()
    session.Train()
    return logits


# float32 against exact (float64) gradients. ResNet-18 at 32x32 ends in 1x1 maps, where train-mode BatchNorm
# normalises over just the 4 samples of the batch: that amplifies rounding, and PyTorch's own float32 gradients
# are 3e-4 away from the float64 ones there.
@pytest.mark.parametrize("name, tol", [("lenet5", 1e-4), ("resnet18", 1e-3)])
def test_first_step_loss_and_every_gradient_equal_pytorch(name: str, tol: float) -> None:
    session = open_session(zoo_training(name))
    module = torch_module(zoo(name))
    x, labels = zoo_batch(name)
    feed(session, x, labels)
    session.RunGraph()
    loss = torch_loss_of(module, x, labels)
    loss.backward()
    assert_close(session.GetOutputByTensorName("loss").numpy(), loss.detach().numpy(), 1e-5)
    grads = named(session.GetGradients())
    expected = {k: p.grad.numpy() for k, p in module.onnx_parameters().items()}
    assert set(grads) == set(expected)
    for k, g in expected.items():
        assert_close(grads[k], g, tol)


def test_feature_maps_are_the_source_weights_in_source_layout() -> None:
    session = open_session(zoo_training("lenet5"), train=False)
    source = {i.name: numpy_helper.to_array(i) for i in zoo("lenet5").graph.initializer}
    maps = named(session.GetFeatureMaps())
    assert maps["conv1.weight"].shape == (6, 1, 5, 5)
    for k, value in maps.items():
        np.testing.assert_array_equal(value, source[k])


def test_resnet18_step_updates_weights_and_batchnorm_statistics_like_pytorch() -> None:
    session = open_session(zoo_training("resnet18"))
    session.SetLearningRate(1e-3)
    module = torch_module(zoo("resnet18"))
    opt = torch.optim.SGD(module.parameters(), lr=1e-3, momentum=0.9)
    x, labels = zoo_batch("resnet18")
    feed(session, x, labels)
    session.RunGraph()
    torch_loss_of(module, x, labels).backward()
    opt.step()
    for k, p in module.onnx_parameters().items():
        assert_close(named(session.GetFeatureMaps())[k], p.detach().numpy(), 1e-4)
    module.eval()
    x = zoo_batch("resnet18", seed=9)[0]
    with torch.no_grad():
        expected = module(torch.from_numpy(x).double()).numpy()
    assert_close(eval_logits(session, x), expected, 1e-3)   # updated running statistics (torch float32: 1.2e-4)


def straight_and_resumed(buf: bytes, batches: list, path: Path) -> tuple[lite.TrainSession, lite.TrainSession]:
    """One session trained on all `batches`; another saved to `path` halfway, reloaded and trained on the rest."""
    straight, first = open_session(buf), open_session(buf)
    for batch in batches:
        feed(straight, *batch)
        straight.RunGraph()
    half = len(batches) // 2
    for batch in batches[:half]:
        feed(first, *batch)
        first.RunGraph()
    first.SaveToFile(path)
    resumed = lite.TrainSession.CreateSession(str(path), lite.Context(thread_num=1), True)
    for batch in batches[half:]:
        feed(resumed, *batch)
        resumed.RunGraph()
    return straight, resumed


def test_resnet18_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    batches = [zoo_batch("resnet18", seed=k) for k in range(4)]
    straight, resumed = straight_and_resumed(zoo_training("resnet18"), batches, tmp_path / "resnet18.ms")
    for k, value in named(straight.GetFeatureMaps()).items():
        np.testing.assert_array_equal(named(resumed.GetFeatureMaps())[k], value)
    for k, value in named(straight.GetOptimizerParams()).items():
        np.testing.assert_array_equal(named(resumed.GetOptimizerParams())[k], value)
    x = zoo_batch("resnet18", seed=9)[0]
    np.testing.assert_array_equal(eval_logits(resumed, x), eval_logits(straight, x))


def test_resnet18_inference_export_folds_batchnorm_and_gives_eval_bit_for_bit(tmp_path: Path) -> None:
    """Eval runs the model the export writes (constant weights pick other kernels than variables, and BatchNorm
    folding rounds): the exported model, in a session of the same context, gives Eval's logits exactly, and
    Eval's callbacks see its nodes and tensors (the biases folding gave the convolutions among them)."""
    session = open_session(zoo_training("resnet18"))
    feed(session, *zoo_batch("resnet18"))
    session.RunGraph()
    x = zoo_batch("resnet18", seed=5)[0]
    expected = eval_logits(session, x)
    seen: list[list[tuple[str, list[str]]]] = [[], []]

    def record(k: int) -> KernelCallBack:
        return lambda ins, outs, param: seen[k].append((param.node_name, [t.tensor_name() for t in ins + outs]))
    session.Eval()
    session.RunGraph(after=record(0))
    session.Export(tmp_path / "resnet18_inference.ms", lite.MT_INFERENCE)
    model = lite.Model.Load(tmp_path / "resnet18_inference.ms")
    ops = {n.op for n in model.nodes}
    assert "BatchNorm" not in ops and not any(op.endswith("Grad") for op in ops) and "Sgd" not in ops
    plain = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    plain.CompileGraph(model)
    plain.GetInputs()[0].set_data(x)
    plain.RunGraph(after=record(1))
    np.testing.assert_array_equal(plain.GetOutputByTensorName("logits").numpy(), expected)
    assert seen[0] == seen[1] and any(name.endswith("/bias") for _, names in seen[0] for name in names)


def test_virtual_batch_sets_the_batchnorm_momentum() -> None:
    session = open_session(zoo_training("resnet18"))
    session.SetupVirtualBatch(2, momentum=0.5)
    reference = onnx.ModelProto.FromString(zoo("resnet18").SerializeToString())
    for node in reference.graph.node:
        if node.op_type == "BatchNormalization":
            kept = [a for a in node.attribute if a.name != "momentum"]
            del node.attribute[:]
            node.attribute.extend([*kept, helper.make_attribute("momentum", 0.5)])
    module = torch_module(reference)
    x, labels = zoo_batch("resnet18")
    feed(session, x, labels)
    session.RunGraph()                                       # half a virtual batch: statistics only
    with torch.no_grad():
        module(torch.from_numpy(x).double())
    module.eval()
    x = zoo_batch("resnet18", seed=9)[0]
    with torch.no_grad():
        expected = module(torch.from_numpy(x).double()).numpy()
    assert_close(eval_logits(session, x), expected, 1e-4)


def dropout_mlp(batch: int = BATCH, seed: int = 0) -> onnx.ModelProto:
    """input [batch, 8] -> Gemm(16) -> Relu -> Dropout(0.5) -> Gemm(3) -> logits."""
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), name)
             for name, shape in (("fc1.weight", (16, 8)), ("fc1.bias", (16,)), ("fc2.weight", (3, 16)),
                                 ("fc2.bias", (3,)))]
    inits.append(numpy_helper.from_array(np.array(0.5, np.float32), "ratio"))
    nodes = [helper.make_node("Gemm", ["input", "fc1.weight", "fc1.bias"], ["h"], name="fc1", transB=1),
             helper.make_node("Relu", ["h"], ["r"], name="relu"),
             helper.make_node("Dropout", ["r", "ratio"], ["d"], name="dropout"),
             helper.make_node("Gemm", ["d", "fc2.weight", "fc2.bias"], ["logits"], name="fc2", transB=1)]
    graph = helper.make_graph(nodes, "dropout_mlp",
                              [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 8])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 3])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def mlp_batches(count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((BATCH, 8)).astype(np.float32), rng.integers(0, 3, BATCH).astype(np.int32))
            for _ in range(count)]


def test_dropout_is_active_in_training_with_a_new_mask_each_step() -> None:
    session = open_session(convert_for_training(dropout_mlp(), TrainParams()))
    session.SetLearningRate(0.0)
    x, labels = mlp_batches(1)[0]
    feed(session, x, labels)
    predictions = []
    for _ in range(2):
        session.RunGraph()
        predictions.append(session.GetPredictions()[0].numpy())
    assert not np.array_equal(*predictions)
    np.testing.assert_array_equal(eval_logits(session, x), eval_logits(session, x))


def test_dropout_checkpoint_resumes_exactly(tmp_path: Path) -> None:
    buf = convert_for_training(dropout_mlp(), TrainParams(optimizer="adam", learning_rate=0.01))
    straight, resumed = straight_and_resumed(buf, mlp_batches(6), tmp_path / "mlp.ms")
    for k, value in named(straight.GetFeatureMaps()).items():
        np.testing.assert_array_equal(named(resumed.GetFeatureMaps())[k], value)


def test_frozen_weights_get_no_gradient_and_keep_their_values(tmp_path: Path) -> None:
    buf = convert_for_training(zoo("lenet5"), TrainParams(learning_rate=0.1, freeze=(r"conv.*",)))
    session = open_session(buf)
    assert sorted(named(session.GetGradients())) == [f"fc{i}.{p}" for i in (1, 2, 3) for p in ("bias", "weight")]
    before = named(session.GetFeatureMaps())
    for step in range(3):
        feed(session, *zoo_batch("lenet5", seed=step))
        session.RunGraph()
    assert any(not np.array_equal(v, before[k]) for k, v in named(session.GetFeatureMaps()).items())
    session.Export(tmp_path / "lenet.ms", lite.MT_INFERENCE)
    stored = {t.name: t.data.transpose(t.source_perm or None) for t in lite.Model.Load(tmp_path / "lenet.ms").tensors
              if t.name.startswith("conv") and t.name.endswith("weight")}
    source = {i.name: numpy_helper.to_array(i) for i in zoo("lenet5").graph.initializer}
    assert set(stored) == {"conv1.weight", "conv2.weight"}
    for k, value in stored.items():
        np.testing.assert_array_equal(value, source[k])


def transfer_models(head_width: int = 6) -> tuple[bytes, bytes]:
    """Backbone: Conv(3 -> 6) -> Relu -> GlobalAveragePool, an inference model with output [4, 6, 1, 1];
    head: Flatten -> Gemm(head_width -> 2), a training model (Sgd, lr 0.1)."""
    rng = np.random.default_rng(0)
    backbone = helper.make_graph(
        [helper.make_node("Conv", ["input", "conv.weight"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("GlobalAveragePool", ["r"], ["features"], name="pool")], "backbone",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH, 3, 8, 8])],
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [BATCH, 6, 1, 1])],
        [numpy_helper.from_array(rng.standard_normal((6, 3, 3, 3)).astype(np.float32), "conv.weight")])
    head = helper.make_graph(
        [helper.make_node("Flatten", ["features"], ["flat"], name="flatten"),
         helper.make_node("Gemm", ["flat", "head.weight", "head.bias"], ["logits"], name="head", transB=1)], "head",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [BATCH, head_width, 1, 1])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 2])],
        [numpy_helper.from_array((rng.standard_normal((2, head_width)) * 0.1).astype(np.float32), "head.weight"),
         numpy_helper.from_array(np.zeros(2, np.float32), "head.bias")])
    opset = [helper.make_opsetid("", 13)]
    return (convert(helper.make_model(backbone, opset_imports=opset)),
            convert_for_training(helper.make_model(head, opset_imports=opset), TrainParams(learning_rate=0.1)))


def test_transfer_session_trains_only_the_head() -> None:
    backbone, head = transfer_models()
    session = lite.TrainSession.CreateTransferSession(backbone, head, lite.Context(thread_num=1), True)
    assert [t.tensor_name() for t in session.GetInputs()] == ["input", "labels"]
    assert sorted(named(session.GetFeatureMaps())) == ["head.bias", "head.weight"]
    x = np.random.default_rng(1).standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
    labels = np.array([0, 1, 0, 1], np.int32)
    session.GetInputsByTensorName("input").set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    losses = []
    for _ in range(20):
        session.RunGraph()
        losses.append(float(session.GetOutputByTensorName("loss").numpy()))
    assert losses[-1] < 0.75 * losses[0]


def test_transfer_inference_export_chains_backbone_and_head(tmp_path: Path) -> None:
    backbone, head = transfer_models()
    session = lite.TrainSession.CreateTransferSession(backbone, head, lite.Context(thread_num=1), True)
    x = np.random.default_rng(2).standard_normal((BATCH, 3, 8, 8)).astype(np.float32)
    session.GetInputsByTensorName("input").set_data(x)
    session.GetInputsByTensorName("labels").set_data(np.array([0, 1, 1, 0], np.int32))
    session.RunGraph()
    session.Eval()
    session.RunGraph()
    session.Export(tmp_path / "transfer.ms", lite.MT_INFERENCE)
    plain = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    plain.CompileGraph(lite.Model.Load(tmp_path / "transfer.ms"))
    assert [t.tensor_name() for t in plain.GetInputs()] == ["input"]
    plain.GetInputs()[0].set_data(x)
    plain.RunGraph()
    # the exported weights are constants, which the compiled kernels multiply in their own GEMM (another order
    # of float32 sums than BLAS on the session's trainable weights): equal within float32 rounding
    np.testing.assert_allclose(plain.GetOutputByTensorName("logits").numpy(), session.GetPredictions()[0].numpy(),
                               rtol=1e-6, atol=1e-7)


def test_transfer_session_resizes_backbone_and_head() -> None:
    backbone, head = transfer_models()
    session = lite.TrainSession.CreateTransferSession(backbone, head, lite.Context(thread_num=1), True)
    session.Resize([session.GetInputs()[0]], [[2, 3, 8, 8]])
    assert [t.shape() for t in session.GetInputs()] == [[2, 3, 8, 8], [2]]
    session.GetInputsByTensorName("input").set_data(np.ones((2, 3, 8, 8), np.float32))
    session.GetInputsByTensorName("labels").set_data(np.array([0, 1], np.int32))
    assert session.RunGraph() == lite.RET_OK


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")
def test_non_finite_loss_leaves_batchnorm_statistics_untouched() -> None:
    session = open_session(zoo_training("resnet18"))
    x, labels = zoo_batch("resnet18")
    probe = zoo_batch("resnet18", seed=9)[0]
    before = eval_logits(session, probe)
    x[0, 0, 0, 0] = np.nan
    feed(session, x, labels)
    with pytest.raises(lite.NonFiniteLossError):
        session.RunGraph()
    np.testing.assert_array_equal(eval_logits(session, probe), before)


def test_transfer_session_rejects_a_head_that_does_not_fit_the_backbone() -> None:
    backbone, _ = transfer_models()
    _, head = transfer_models(head_width=5)
    with pytest.raises(lite.ParamInvalidError, match="does not match the backbone's output 'features'"):
        lite.TrainSession.CreateTransferSession(backbone, head, lite.Context(thread_num=1))
