"""The training-graph builder (`--trainModel=true`): config parsing, the format of docs/training.md, pruning of
frozen parts, gradient accumulation, and gradients equal to PyTorch's when every op of the built graph runs as its
PyTorch definition (the runtime's gradient kernels are tested on their own)."""
from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper
from torch.autograd.functional import vjp

import lite
import models
from converter import convert, convert_file, convert_for_training
from converter.ir import Graph, Node
from converter.train import TrainParams, forward_graph, load_train_config, parse_train_flags, to_training_graph
from converter.frontends.onnx import OnnxSource
from converter.train.weights import restore_source_names
from lite.status import NotSupportedError, ParamInvalidError
from tests.oracles import torch_reference
from tests.oracles.torch_reference import to_torch
from schema import fb
from tests.util import run_lite, small_cnn

GRAD_OPS = re.compile(r".*Grad(Input|Filter)?$")


def _subgraphs(graph: Graph) -> dict:
    return {sg.name: sg for sg in graph.subgraphs}


def _weights(model: onnx.ModelProto) -> list[str]:
    """The float initializers PyTorch trains (BatchNorm running statistics are buffers)."""
    stats = {i for n in model.graph.node if n.op_type == "BatchNormalization" for i in n.input[3:5]}
    return [w for w in OnnxSource(model).float_weights() if w not in stats]


def _trained(graph: Graph) -> list[str]:
    return [n.inputs[0] for n in _subgraphs(graph)["optimizer"].nodes]


def _backward(graph: Graph) -> list[Node]:
    """The loss and gradient nodes."""
    return [n for n in _subgraphs(graph)["gradients"].nodes if not n.name.endswith("/train")]


def _resnet18() -> onnx.ModelProto:
    return models.build("resnet18", num_classes=10, input_size=32, batch=4)


def _model(nodes: list, inits: dict[str, np.ndarray], shape: list[int], out_shape: list[int]) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(len(shape)).standard_normal(shape)


# ---- config --------------------------------------------------------------------------------------------------------
def test_defaults_are_sparse_cross_entropy_and_plain_sgd() -> None:
    p = TrainParams()
    assert (p.loss, p.labels, p.optimizer, p.momentum, p.learning_rate) == \
        ("softmax_cross_entropy", "sparse", "sgd", 0.0, 0.01)


def test_momentum_optimizer_defaults_to_momentum_0_9() -> None:
    assert TrainParams(optimizer="momentum").momentum == 0.9


def test_config_file_section_is_parsed(tmp_path) -> None:
    path = tmp_path / "train.cfg"
    path.write_text("[other]\nx = 1\n[train_param]\nloss = smooth_l1\nbeta = 0.5\noptimizer = adam\n"
                    "learning_rate = 0.001 ; comment\nweight_decay = 0.01\ntrainable = fc_.*, conv2\\..*\n"
                    "freeze_until = conv1\n")
    p = load_train_config(path)
    assert (p.loss, p.beta, p.optimizer, p.learning_rate, p.weight_decay) == ("smooth_l1", 0.5, "adam", 0.001, 0.01)
    assert p.trainable == ("fc_.*", "conv2\\..*") and p.freeze_until == "conv1"


def test_config_file_without_section_gives_defaults(tmp_path) -> None:
    path = tmp_path / "quant.cfg"
    path.write_text("[common_quant_param]\nquant_type = WEIGHT_QUANT\n")
    assert load_train_config(path) == TrainParams()


@pytest.mark.parametrize("text, key", [("lossfn = mse", "lossfn"), ("loss = hinge", "loss"),
                                       ("learning_rate = fast", "learning_rate"), ("beta1 = 0.8", "beta1"),
                                       ("nesterov = maybe", "nesterov"), ("freeze = conv[", "freeze"),
                                       ("momentum = 1.5", "momentum")])
def test_config_errors_name_the_key(tmp_path, text: str, key: str) -> None:
    path = tmp_path / "train.cfg"
    path.write_text(f"[train_param]\n{text}\n")
    with pytest.raises(ParamInvalidError, match=key):
        load_train_config(path)


def test_flags_use_camel_case_names() -> None:
    p = parse_train_flags({"loss": "mse", "optimizer": "momentum", "learningRate": "0.1", "--freezeUntil": "n1",
                           "trainable": "fc.*", "weightDecay": "0.001"})
    assert (p.loss, p.optimizer, p.learning_rate, p.freeze_until, p.trainable, p.weight_decay) == \
        ("mse", "momentum", 0.1, "n1", ("fc.*",), 0.001)


def test_unknown_flag_is_named() -> None:
    with pytest.raises(ParamInvalidError, match="--lossScale"):
        parse_train_flags({"lossScale": "2"})


# ---- format --------------------------------------------------------------------------------------------------------
def test_subgraphs_inputs_and_outputs_follow_the_contract() -> None:
    graph = to_training_graph(small_cnn(batch=2), TrainParams())
    sg = _subgraphs(graph)
    grads = [f"{w}/grad" for w in _trained(graph)]
    assert list(sg) == ["eval", "gradients", "optimizer"]
    assert (graph.inputs, graph.outputs) == (["input", "labels"], ["loss", "logits/train"])
    assert (sg["eval"].inputs, sg["eval"].outputs) == (["input"], ["logits", "probs"])
    assert (sg["gradients"].inputs, sg["gradients"].outputs) == (["input", "labels"],
                                                                  ["loss", "logits/train", *grads])
    assert (sg["optimizer"].inputs, sg["optimizer"].outputs) == (grads, [])
    assert sorted(map(id, graph.nodes)) == sorted(id(n) for s in sg.values() for n in s.nodes)


def test_every_weight_trains_under_its_source_name() -> None:
    model = small_cnn()
    graph = to_training_graph(model, TrainParams())
    assert _trained(graph) == _weights(model)


def test_conv_weights_carry_the_permutation_back_to_onnx_layout() -> None:
    model = small_cnn()
    graph = to_training_graph(model, TrainParams())
    source = OnnxSource(model).float_weights()
    for name in ("w1", "w2"):
        value = graph.values[name]
        assert value.source_perm == (0, 3, 1, 2)
        np.testing.assert_array_equal(value.const.transpose(value.source_perm), source[name])
    assert graph.values["fc_w"].source_perm == ()


def test_restoring_source_names_is_idempotent() -> None:
    model = small_cnn()
    graph = forward_graph(model)
    before = {k: v.source_perm for k, v in graph.values.items()}
    restore_source_names(graph, OnnxSource(model))
    assert {k: v.source_perm for k, v in graph.values.items()} == before


def test_eval_forward_is_inference_and_train_forward_is_training() -> None:
    graph = to_training_graph(small_cnn(), TrainParams())
    sg = _subgraphs(graph)
    assert not any(n.attrs.get("training") or GRAD_OPS.match(n.op) for n in sg["eval"].nodes)
    bn = next(n for n in sg["gradients"].nodes if n.op == "BatchNorm")
    assert bn.attrs["training"] and len(bn.outputs) == 3
    assert bn.inputs[1:] == next(n for n in sg["eval"].nodes if n.op == "BatchNorm").inputs[1:]


def test_dropout_is_kept_and_masks_its_gradient() -> None:
    model = _model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
                    helper.make_node("Dropout", ["h"], ["y"], name="drop")],
                   {"w": _rand(3, 5), "b": _rand(3)}, [2, 5], [2, 3])
    sg = _subgraphs(to_training_graph(model, TrainParams()))
    assert [n.attrs.get("training") for n in sg["eval"].nodes if n.op == "Dropout"] == [None]
    drop = next(n for n in sg["gradients"].nodes if n.op == "Dropout")
    grad = next(n for n in sg["gradients"].nodes if n.op == "DropoutGrad")
    assert drop.attrs["training"] and grad.inputs[1] == drop.outputs[1]


@pytest.mark.parametrize("optimizer, op, state", [("sgd", "Sgd", {"accum": 0, "stat": 1}),
                                                  ("momentum", "ApplyMomentum", {"accum": 0}),
                                                  ("adam", "Adam", {"m": 0, "v": 0, "step": 0})])
def test_optimizer_nodes_read_their_state_and_the_shared_learning_rate(optimizer: str, op: str,
                                                                       state: dict[str, float]) -> None:
    graph = to_training_graph(small_cnn(), TrainParams(optimizer=optimizer, learning_rate=0.05))
    assert float(graph.const("learning_rate")) == np.float32(0.05) and graph.values["learning_rate"].shape == ()
    for node in _subgraphs(graph)["optimizer"].nodes:
        w = node.inputs[0]
        assert node.op == op and "learning_rate" in node.inputs and not node.outputs
        assert node.inputs[1 if op == "Sgd" else -1] == f"{w}/grad"
        for s, fill in state.items():
            value = graph.const(f"{w}/{s}")
            assert f"{w}/{s}" in node.inputs and (value == fill).all() and value.dtype == np.float32
            assert value.shape == (() if s in ("step", "stat") else graph.values[w].shape)


@pytest.mark.parametrize("loss, labels, op, dtype, shape", [
    ("softmax_cross_entropy", "sparse", "SparseSoftmaxCrossEntropyWithLogits", np.int32, (4,)),
    ("softmax_cross_entropy", "onehot", "SoftmaxCrossEntropyWithLogits", np.float32, (4, 4)),
    ("mse", "sparse", "MSELoss", np.float32, (4, 4)),
    ("bce_with_logits", "sparse", "BinaryCrossEntropy", np.float32, (4, 4)),
    ("smooth_l1", "sparse", "SmoothL1Loss", np.float32, (4, 4))])
def test_loss_node_and_labels(loss: str, labels: str, op: str, dtype: type, shape: tuple[int, ...]) -> None:
    graph = to_training_graph(small_cnn(batch=4), TrainParams(loss=loss, labels=labels))
    node = next(n for n in graph.nodes if n.outputs[:1] == ["loss"])
    assert (node.op, node.inputs, node.outputs) == (op, ["logits/train", "labels"], ["loss", "logits/train/grad"])
    assert (graph.values["labels"].dtype, graph.values["labels"].shape) == (np.dtype(dtype), shape)


def test_output_parameter_picks_the_prediction() -> None:
    graph = to_training_graph(small_cnn(), TrainParams(output="probs"))
    assert graph.outputs == ["loss", "probs/train"]
    assert any(n.op == "SoftmaxGrad" for n in _backward(graph))


def test_transpose_gradient_uses_the_inverse_permutation() -> None:
    graph = to_training_graph(models.build("lenet5", num_classes=10, input_size=32), TrainParams())
    forward = next(n for n in _subgraphs(graph)["gradients"].nodes if n.op == "Transpose" and
                   n.attrs["perm"] == [0, 3, 1, 2])
    backward = next(n for n in _backward(graph) if n.op == "Transpose")
    assert backward.attrs["perm"] == [0, 2, 3, 1] and backward.outputs[0] == f"{forward.inputs[0]}/grad"


# ---- accumulation and pruning --------------------------------------------------------------------------------------
def test_gradients_of_a_value_read_twice_are_summed() -> None:
    model = _model([helper.make_node("Gemm", ["x", "w", "b"], ["h"], name="fc", transB=1),
                    helper.make_node("Relu", ["h"], ["r"], name="relu"),
                    helper.make_node("Mul", ["h", "r"], ["y"], name="mul")],
                   {"w": _rand(3, 5), "b": _rand(3)}, [2, 5], [2, 3])
    graph = to_training_graph(model, TrainParams(loss="mse"))
    fc_grad = next(n for n in _backward(graph) if n.op == "FullConnectionGrad")
    total = next(n for n in _backward(graph) if n.outputs == fc_grad.inputs[:1])
    from_mul = next(n for n in _backward(graph) if n.op == "MulGrad").outputs[0]
    from_relu = next(n for n in _backward(graph) if n.op == "ActivationGrad").outputs[0]
    assert total.op == "Add" and sorted(total.inputs) == sorted([from_mul, from_relu])


def test_a_weight_read_by_two_nodes_gets_one_summed_gradient() -> None:
    model = _model([helper.make_node("Gemm", ["x", "w"], ["h"], name="fc1", transB=1),
                    helper.make_node("Gemm", ["h", "w"], ["y"], name="fc2", transB=1)],
                   {"w": _rand(4, 4)}, [2, 4], [2, 4])
    graph = to_training_graph(model, TrainParams(loss="mse"))
    assert _trained(graph) == ["w"]
    assert [n.inputs[2] for n in _backward(graph) if n.op == "FullConnectionGrad"] == ["w", "w"]
    assert next(n for n in _backward(graph) if n.outputs == ["w/grad"]).op == "Add"


def test_an_input_read_twice_by_one_node_gets_both_gradients() -> None:
    model = _model([helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
                    helper.make_node("Mul", ["h", "h"], ["y"], name="square")],
                   {"w": _rand(3, 5)}, [2, 5], [2, 3])
    backward = _backward(to_training_graph(model, TrainParams(loss="mse")))
    mul_grad = next(n for n in backward if n.op == "MulGrad")
    total = next(n for n in backward if n.op == "Add")
    assert len(set(mul_grad.outputs)) == 2 and sorted(total.inputs) == sorted(mul_grad.outputs)


def test_a_weight_whose_gradient_is_another_value_gets_a_copy_under_its_name() -> None:
    model = _model([helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
                    helper.make_node("Add", ["h", "offset"], ["y"], name="add")],
                   {"w": _rand(3, 5), "offset": _rand(2, 3)}, [2, 5], [2, 3])
    backward = _backward(to_training_graph(model, TrainParams(loss="mse")))
    copy = next(n for n in backward if n.outputs == ["offset/grad"])
    assert (copy.op, copy.inputs) == ("Identity", ["y/train/grad"])


def test_no_gradient_flows_into_graph_inputs() -> None:
    graph = to_training_graph(small_cnn(), TrainParams())
    assert not any(n.op == "Conv2DGradInput" and "w1" in n.inputs for n in _backward(graph))
    assert sum(n.op == "Conv2DGradInput" for n in _backward(graph)) == 1


def test_freeze_until_prunes_the_backbone_and_runs_its_batchnorm_in_inference_mode() -> None:
    model = _resnet18()
    graph = to_training_graph(model, TrainParams(freeze_until="/layer4/layer4.0/Add"))
    cut = next(i for i, n in enumerate(model.graph.node) if n.name == "/layer4/layer4.0/Add")
    frozen_nodes = {n.name for n in model.graph.node[:cut + 1]}
    assert _trained(graph) == [w for w in _weights(model) if w.startswith(("layer4.1.", "fc."))]
    assert not any(n.name.rsplit("/", 1)[0] in frozen_nodes for n in _backward(graph))
    for bn in (n for n in _subgraphs(graph)["gradients"].nodes if n.op == "BatchNorm"):
        assert bool(bn.attrs.get("training")) == bn.name.startswith("/layer4/layer4.1/")


def test_trainable_head_only_computes_the_head_gradient() -> None:
    graph = to_training_graph(_resnet18(), TrainParams(trainable=("fc\\..*",)))
    assert _trained(graph) == ["fc.weight", "fc.bias"]
    assert [n.op for n in _backward(graph)] == ["SparseSoftmaxCrossEntropyWithLogits", "FullConnectionGrad"]


def test_freeze_regex_excludes_matching_weights() -> None:
    graph = to_training_graph(small_cnn(), TrainParams(freeze=("w1", "b1")))
    assert _trained(graph) == ["gamma", "beta", "w2", "fc_w", "fc_b"]
    assert "w1/grad" not in graph.values and "b1/grad" not in graph.values


@pytest.mark.parametrize("params, key", [(TrainParams(freeze=("conv9.*",)), "freeze"),
                                         (TrainParams(trainable=("nothing",)), "trainable"),
                                         (TrainParams(freeze_until="no_such_node"), "freeze_until"),
                                         (TrainParams(freeze_until="fc"), "no weight is left"),
                                         (TrainParams(output="nope"), "output")])
def test_selection_errors_are_named(params: TrainParams, key: str) -> None:
    with pytest.raises(ParamInvalidError, match=key):
        to_training_graph(small_cnn(), params)


def _layer_norm_model() -> onnx.ModelProto:
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["n"], name="ln"),
             helper.make_node("Gemm", ["n", "w"], ["y"], name="fc", transB=1)]
    return _model(nodes, {"s": _rand(5), "b": _rand(5), "w": _rand(3, 5)}, [2, 5], [2, 3])


def test_frozen_layer_norm_is_accepted() -> None:
    assert _trained(to_training_graph(_layer_norm_model(), TrainParams(loss="mse", freeze=("s", "b")))) == ["w"]


def test_op_without_gradient_on_a_trained_path_is_refused() -> None:
    nodes = [helper.make_node("Gemm", ["x", "w"], ["h"], name="fc", transB=1),
             helper.make_node("Mod", ["h", "d"], ["y"], name="mod", fmod=1)]
    model = _model(nodes, {"w": _rand(3, 5)}, [2, 5], [2, 3])
    model.graph.initializer.append(numpy_helper.from_array(np.array(0.7, np.float32), "d"))
    with pytest.raises(NotSupportedError, match="'Mod' at node 'mod'"):
        to_training_graph(model, TrainParams(loss="mse"))


# ---- the written model ---------------------------------------------------------------------------------------------
def test_training_model_round_trips_through_the_runtime_reader() -> None:
    model = small_cnn(batch=2)
    m = lite.Model.Import(convert_for_training(model, TrainParams(optimizer="adam")))
    names = {sg: [n.name for n in m.subgraphs[sg].nodes] for sg in m.subgraphs}
    assert set(names) == {"eval", "gradients", "optimizer"} and len(names["optimizer"]) == len(_weights(model))
    tensors = {t.name: t for t in m.tensors}
    assert tensors["w1"].source_perm == (0, 3, 1, 2) and tensors["w1"].is_const
    assert [m.tensors[i].name for i in m.inputs] == ["input", "labels"]


def test_plain_session_runs_the_eval_subgraph_like_the_inference_model() -> None:
    model = _resnet18()
    x = np.random.default_rng(0).standard_normal((4, 3, 32, 32)).astype(np.float32)
    runs = []
    for buf in (convert_for_training(model, TrainParams()), convert(model)):
        runs.append(run_lite(lite.LiteSession.CreateSession(buf, len(buf), lite.Context()), {"input": x}))
    got, want = runs[0]["logits"], runs[1]["logits"]
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4


def test_convert_file_writes_a_training_model(tmp_path) -> None:
    onnx.save(small_cnn(), tmp_path / "m.onnx")
    path = convert_file(tmp_path / "m.onnx", tmp_path / "m", train_params=TrainParams())
    assert "gradients" in lite.Model.Load(path).subgraphs


# ---- gradients of the built graph, each op run as its PyTorch definition -------------------------------------------
A = fb.ActivationType
_ACTIVATIONS = {A.RELU: F.relu, A.RELU6: lambda x: x.clamp(0, 6)}


def _window(x: torch.Tensor, a: dict, value: float = 0.0) -> torch.Tensor:
    """NHWC -> padded NCHW."""
    return F.pad(x.permute(0, 3, 1, 2), (a["pad_left"], a["pad_right"], a["pad_top"], a["pad_bottom"]), value=value)


def _conv(x: torch.Tensor, w: torch.Tensor, a: dict) -> torch.Tensor:
    y = F.conv2d(_window(x, a), w.permute(0, 3, 1, 2), None, (a["stride_h"], a["stride_w"]), 0,
                 (a["dilation_h"], a["dilation_w"]), a["group"])
    return y.permute(0, 2, 3, 1)


def _pool(x: torch.Tensor, a: dict) -> torch.Tensor:
    if a.get("global_pool"):
        return x.mean((1, 2), keepdim=True)
    kernel, stride = (a["kernel_h"], a["kernel_w"]), (a["stride_h"], a["stride_w"])
    if a["mode"] == fb.PoolMode.MAX:
        return F.max_pool2d(_window(x, a, float("-inf")), kernel, stride).permute(0, 2, 3, 1)
    return F.avg_pool2d(_window(x, a), kernel, stride).permute(0, 2, 3, 1)


def _batch_norm(x: torch.Tensor, scale: torch.Tensor, bias: torch.Tensor, eps: float) -> tuple[torch.Tensor, ...]:
    """Training BatchNorm over the last (channel) axis: y, batch mean, batch invstd."""
    dims = tuple(range(x.dim() - 1))
    mean, invstd = x.mean(dims), 1 / torch.sqrt(x.var(dims, unbiased=False) + eps)
    return (x - mean) * invstd * scale + bias, mean, invstd


def _torch_op(node: Node, i: list, shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
    a, op = node.attrs, node.op
    eps = a.get("epsilon", 1e-5)
    rules = {
        "Transpose": lambda: [i[0].permute(*a["perm"])],
        "Conv2D": lambda: [_conv(i[0], i[1], a) + (i[2] if len(i) > 2 else 0)],
        "Activation": lambda: [_ACTIVATIONS[a["type"]](i[0])],
        "Pooling": lambda: [_pool(i[0], a)],
        "Reshape": lambda: [i[0].reshape([d if s == 0 else int(s) for d, s in zip(i[0].shape, i[1].tolist())])],
        "Flatten": lambda: [i[0].reshape(i[0].shape[0], -1)],
        "FullConnection": lambda: [i[0] @ i[1].T + (i[2] if len(i) > 2 else 0)],
        "Add": lambda: [i[0] + i[1]], "Mul": lambda: [i[0] * i[1]], "Div": lambda: [i[0] / i[1]],
        "Sqrt": lambda: [i[0].sqrt()],
        "BatchNorm": lambda: list(_batch_norm(*i[:3], eps)) if a.get("training") else
        [(i[0] - i[3]) / torch.sqrt(i[4] + eps) * i[1] + i[2]],
        "SparseSoftmaxCrossEntropyWithLogits": lambda: [F.cross_entropy(i[0], i[1].long()),
                                                        vjp(lambda z: F.cross_entropy(z, i[1].long()), i[0])[1]],
        "ActivationGrad": lambda: [vjp(_ACTIVATIONS[a["type"]], i[1], i[0])[1]],
        "Conv2DGradInput": lambda: [vjp(lambda x: _conv(x, i[1], a), i[2], i[0])[1]],
        "Conv2DGradFilter": lambda: [vjp(lambda w: _conv(i[1], w, a), torch.zeros(shapes[0], dtype=i[0].dtype),
                                         i[0])[1]],
        "BiasGrad": lambda: [i[0].sum_to_size(shapes[0])],
        "PoolingGrad": lambda: [vjp(lambda x: _pool(x, a), i[1], i[0])[1]],
        "ReshapeGrad": lambda: [i[0].reshape(i[1].shape)],
        "FullConnectionGrad": lambda: list(vjp(lambda x, w, b: x @ w.T + b, (i[1], i[2], torch.zeros(
            i[2].shape[0], dtype=i[0].dtype)), i[0])[1])[:len(shapes)],
        "BatchNormGrad": lambda: list(vjp(lambda x, s, b: _batch_norm(x, s, b, eps)[0],
                                          (i[1], i[2], torch.zeros_like(i[2])), i[0])[1]),
    }
    return rules[op]()


def _run_in_torch(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    env = {k: torch.from_numpy(np.array(v.const)) for k, v in graph.values.items() if v.const is not None}
    env.update({k: torch.from_numpy(v) for k, v in feeds.items()})
    env = {k: v.double() if v.is_floating_point() else v for k, v in env.items()}
    for node in _subgraphs(graph)["gradients"].nodes:
        outs = _torch_op(node, [env[i] for i in node.inputs], [graph.values[o].shape for o in node.outputs])
        env.update(zip(node.outputs, outs))
    return env


def _torch_reference(model: onnx.ModelProto, x: np.ndarray, labels: np.ndarray, frozen: set[str],
                     monkeypatch: pytest.MonkeyPatch) -> tuple[float, dict[str, np.ndarray]]:
    """Loss and weight gradients of PyTorch in train mode; the BatchNorm layers of `frozen` scales run in
    inference mode, as the builder runs frozen layers."""
    module = to_torch(model).double().train()
    params = module.onnx_parameters()
    frozen_scales = [params[w] for w in frozen]
    batch_norm = torch_reference.OPS["BatchNormalization"]
    monkeypatch.setitem(torch_reference.OPS, "BatchNormalization", lambda ins, a, training: batch_norm(
        ins, a, training and not any(ins[1] is p for p in frozen_scales)))
    loss = F.cross_entropy(module(torch.from_numpy(x).double()), torch.from_numpy(labels).long())
    loss.backward()
    return loss.item(), {k: p.grad.numpy() for k, p in params.items() if k not in frozen}


@pytest.mark.parametrize("name, freeze", [("lenet5", ()), ("resnet18", ()),
                                          ("resnet18", ("bn1.weight", "bn1.bias", "layer1.0.bn2.weight",
                                                        "layer1.0.bn2.bias"))])
def test_built_gradients_equal_pytorch_autograd(name: str, freeze: tuple[str, ...], monkeypatch) -> None:
    model = models.build(name, num_classes=10, input_size=32, batch=4)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1 if name == "lenet5" else 3, 32, 32)).astype(np.float32)
    labels = rng.integers(0, 10, 4).astype(np.int32)
    graph = to_training_graph(model, TrainParams(freeze=tuple(re.escape(w) for w in freeze)))
    env = _run_in_torch(graph, {"input": x, "labels": labels})
    loss, want = _torch_reference(model, x, labels, set(freeze), monkeypatch)
    assert float(env["loss"]) == pytest.approx(loss, rel=1e-9)
    assert sorted(_trained(graph)) == sorted(want)
    for w in _trained(graph):
        got = env[f"{w}/grad"].numpy()
        perm = graph.values[w].source_perm
        got = got.transpose(perm) if perm else got
        assert np.abs(got - want[w]).max() <= 1e-7 * max(np.abs(want[w]).max(), 1e-6), w


# ---- end to end through lite.TrainSession, on ops whose gradient kernels exist -------------------------------------
def _shape_mix() -> onnx.ModelProto:
    """x [4, 6] -> x * w1 + b1 -> Split [1, 2, 3] (part 0 unused) -> Concat(p2, exp(p1)) -> Pad -> Transpose ->
    Slice -> Transpose -> u - mean(u) -> * w2: logits [4, 4], every shape and elementwise rule on one path."""
    ints = {"split": [1, 2, 3], "pads": [0, 0, 0, 1], "starts": [1], "ends": [5], "axes": [0]}
    nodes = [helper.make_node("Mul", ["x", "w1"], ["a"], name="mul"),
             helper.make_node("Add", ["a", "b1"], ["h"], name="add"),
             helper.make_node("Split", ["h", "split"], ["p0", "p1", "p2"], name="split", axis=1),
             helper.make_node("Exp", ["p1"], ["e"], name="exp"),
             helper.make_node("Concat", ["p2", "e"], ["c"], name="concat", axis=1),
             helper.make_node("Pad", ["c", "pads"], ["d"], name="pad"),
             helper.make_node("Transpose", ["d"], ["t"], name="t1", perm=[1, 0]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["s"], name="slice"),
             helper.make_node("Transpose", ["s"], ["u"], name="t2", perm=[1, 0]),
             helper.make_node("ReduceMean", ["u"], ["m"], name="mean", axes=[1], keepdims=1),
             helper.make_node("Sub", ["u", "m"], ["v"], name="sub"),
             helper.make_node("Mul", ["v", "w2"], ["y"], name="scale")]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.5, k)
             for k, s in (("w1", (6,)), ("b1", (1, 6)), ("w2", (4,)))]
    inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in ints.items()]
    graph = helper.make_graph(nodes, "shape_mix", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def _shape_mix_torch(x: torch.Tensor, w: dict[str, torch.Tensor]) -> torch.Tensor:
    _, p1, p2 = torch.split(x * w["w1"] + w["b1"], [1, 2, 3], dim=1)
    u = F.pad(torch.cat([p2, p1.exp()], 1), (0, 1)).T[1:5].T
    return (u - u.mean(1, keepdim=True)) * w["w2"]


_TORCH_LOSSES = {"softmax_cross_entropy": F.cross_entropy, "mse": F.mse_loss,
                 "bce_with_logits": F.binary_cross_entropy_with_logits,
                 "smooth_l1": lambda p, t: F.smooth_l1_loss(p, t, beta=0.5)}


@pytest.mark.parametrize("loss, labels", [("softmax_cross_entropy", "sparse"), ("softmax_cross_entropy", "onehot"),
                                          ("mse", "sparse"), ("bce_with_logits", "sparse"), ("smooth_l1", "sparse")])
def test_first_step_loss_and_gradients_through_the_runtime_equal_pytorch(loss: str, labels: str) -> None:
    model = _shape_mix()
    params = TrainParams(loss=loss, labels=labels, beta=0.5 if loss == "smooth_l1" else 1.0, freeze=("w1",))
    buf = convert_for_training(model, params)
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1), True)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    classes = rng.integers(0, 4, 4)
    target = {"sparse": classes.astype(np.int32), "onehot": np.eye(4, dtype=np.float32)[classes]}[labels] \
        if loss == "softmax_cross_entropy" else rng.uniform(0, 1, (4, 4)).astype(np.float32)
    session.GetInputsByTensorName("x").set_data(x)
    session.GetInputsByTensorName("labels").set_data(target)
    assert session.RunGraph() == lite.RET_OK

    w = {k: torch.tensor(v, dtype=torch.float64, requires_grad=k != "w1") for k, v in OnnxSource(model).float_weights().items()}
    want = _TORCH_LOSSES[loss](_shape_mix_torch(torch.from_numpy(x).double(), w),
                               torch.from_numpy(target).long() if labels == "sparse" and loss ==
                               "softmax_cross_entropy" else torch.from_numpy(target).double())
    want.backward()
    assert float(session.GetOutputByTensorName("loss").numpy()) == pytest.approx(want.item(), rel=1e-5)
    grads = {t.tensor_name(): t.numpy() for t in session.GetGradients()}
    assert sorted(grads) == ["b1", "w2"]
    for name, got in grads.items():
        expected = w[name].grad.numpy()
        assert np.abs(got - expected).max() <= 1e-4 * np.abs(expected).max(), name


def test_layer_norm_trains_like_pytorch() -> None:
    """Gemm -> LayerNormalization -> Gemm: loss and every gradient equal PyTorch autograd's."""
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((4, 8)), "b0": np.zeros(8), "s": rng.uniform(0.5, 1.5, 8),
               "b": rng.standard_normal(8), "w2": rng.standard_normal((3, 8))}
    weights = {k: v.astype(np.float32) for k, v in weights.items()}
    nodes = [helper.make_node("Gemm", ["x", "w", "b0"], ["h"]),
             helper.make_node("LayerNormalization", ["h", "s", "b"], ["n"], axis=-1),
             helper.make_node("Gemm", ["n", "w2"], ["logits"], transB=1)]
    model = helper.make_model(helper.make_graph(
        nodes, "ln", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [5, 3])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()]), opset_imports=[helper.make_opsetid("", 17)])
    buf = convert_for_training(model, TrainParams())
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    x, labels = rng.standard_normal((5, 4)).astype(np.float32), np.array([0, 1, 2, 1, 0], np.int32)
    session.GetInputsByTensorName("x").set_data(x)
    session.GetInputsByTensorName("labels").set_data(labels)
    session.RunGraph()
    t = {k: torch.tensor(v, requires_grad=True) for k, v in weights.items()}
    hidden = torch.nn.functional.layer_norm(torch.tensor(x) @ t["w"] + t["b0"], (8,), t["s"], t["b"], eps=1e-5)
    loss = torch.nn.functional.cross_entropy(hidden @ t["w2"].T, torch.tensor(labels).long())
    loss.backward()
    assert float(session.GetOutputByTensorName("loss").numpy()) == pytest.approx(loss.item(), rel=1e-5)
    for grad in session.GetGradients():
        ref = t[grad.tensor_name()].grad.numpy()
        assert np.abs(grad.numpy() - ref).max() <= 1e-4 * np.abs(ref).max(), grad.tensor_name()
