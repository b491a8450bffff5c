"""Model zoo and PyTorch reference executor: validity, onnxruntime agreement, training behaviour, determinism."""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

import numpy as np
import onnx
import pytest

import models

ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch", reason="the zoo models are built with PyTorch (the dev extra installs it)")
from tests.oracles.torch_reference import to_torch  # noqa: E402  (needs torch)

LITE0 = Path(__file__).resolve().parents[2].parent / "shared" / "models" / "efficientnet_lite0.onnx"
needs_lite0 = pytest.mark.skipif(not LITE0.exists(), reason=f"real EfficientNet-Lite0 not found at {LITE0}")

NUM_CLASSES, BATCH = 10, 2
SMALL_SIZE = {"alexnet": 64}  # every other model is tested at 32x32

# Trainable parameter counts at 1000 classes / 224x224 (LeNet-5: 10 classes, 32x32): the published figures
# (torchvision, Keras MobileNet, LeNet-5 61,706, AlexNet "60 million" with the paper's two-GPU grouping).
REFERENCE_PARAMETERS = {
    "lenet5": 61_706,
    "alexnet": 60_965_224,
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "mobilenet_v1": 4_231_976,
    "mobilenet_v2": 3_504_872,
    "mobilenet_v3_small": 2_542_856,
    "mobilenet_v3_large": 5_483_032,
    "efficientnet_b0": 5_288_548,
    "efficientnet_lite0": 4_652_008,     # the published checkpoint's own count
}

EXPECTED_OPS = {
    "lenet5": {"Conv", "Relu", "AveragePool", "Flatten", "Gemm"},
    "alexnet": {"Conv", "Relu", "LRN", "MaxPool", "Dropout", "Gemm"},
    "resnet18": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Gemm"},
    "resnet50": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Add", "GlobalAveragePool", "Gemm"},
    "mobilenet_v1": {"Conv", "BatchNormalization", "Relu", "GlobalAveragePool", "Gemm"},
    "mobilenet_v2": {"Conv", "BatchNormalization", "Clip", "Add", "Dropout", "Gemm"},
    "mobilenet_v3_small": {"Conv", "BatchNormalization", "HardSigmoid", "Mul", "Relu", "Add", "Dropout"},
    "mobilenet_v3_large": {"Conv", "BatchNormalization", "HardSigmoid", "Mul", "Relu", "Add", "Dropout"},
    "efficientnet_b0": {"Conv", "BatchNormalization", "Sigmoid", "Mul", "Add", "GlobalAveragePool", "Dropout"},
    "efficientnet_lite0": {"Conv", "BatchNormalization", "Clip", "Add", "GlobalAveragePool", "Dropout", "Gemm"},
}


@functools.cache
def small_model(name: str) -> onnx.ModelProto:
    return models.build(name, num_classes=NUM_CLASSES, input_size=SMALL_SIZE.get(name, 32), batch=BATCH)


def sample_input(model: onnx.ModelProto, seed: int = 0) -> np.ndarray:
    dims = model.graph.input[0].type.tensor_type.shape.dim
    shape = [d.dim_value or BATCH for d in dims]
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def run_ort(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def run_torch(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return to_torch(model).eval()(torch.from_numpy(x)).numpy()


def relative_error(y: np.ndarray, reference: np.ndarray) -> float:
    return float(np.abs(y - reference).max() / (reference.max() - reference.min()))


def trainable_count(model: onnx.ModelProto) -> int:
    stats = {n.input[i] for n in model.graph.node if n.op_type == "BatchNormalization" for i in (3, 4)}
    return sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.name not in stats)


def test_zoo_names() -> None:
    assert set(models.ZOO) == set(REFERENCE_PARAMETERS)


@pytest.mark.parametrize("name", list(models.ZOO))
def test_small_model_is_valid_and_matches_torch(name: str) -> None:
    model = small_model(name)
    onnx.checker.check_model(model, full_check=True)
    assert (model.ir_version, model.opset_import[0].version) == (8, 13)
    assert [i.name for i in model.graph.input] == ["input"] and [o.name for o in model.graph.output] == ["logits"]
    assert EXPECTED_OPS[name] <= {n.op_type for n in model.graph.node}
    x = sample_input(model)
    reference = run_ort(model, x)
    assert reference.shape == (BATCH, NUM_CLASSES) and np.isfinite(reference).all()
    assert np.abs(reference[0] - reference[1]).max() > 1e-3 * np.abs(reference).max()  # output depends on input
    assert relative_error(run_torch(model, x), reference) < 1e-4


@pytest.mark.parametrize("name", list(models.ZOO))
def test_architecture_parameter_count(name: str) -> None:
    model = small_model(name)
    head_name = next(n.input[1] for n in model.graph.node if n.output[0] == "logits")
    head = next(t for t in model.graph.initializer if t.name == head_name)
    classes = 10 if name == "lenet5" else 1000
    count = trainable_count(model) + (classes - NUM_CLASSES) * (head.dims[1] + 1)
    if name == "alexnet":  # the 64x64 classifier sees 256x1x1 features instead of 256x6x6
        count += (256 * 36 - 256) * 4096
    assert count == REFERENCE_PARAMETERS[name]


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2", "resnet50", "efficientnet_b0"])
def test_full_size_logits_are_sane(name: str) -> None:
    model = models.build(name)
    logits = run_ort(model, sample_input(model))
    assert logits.shape == (1, 1000) and np.isfinite(logits).all()
    assert 0.1 < logits.std() < 100


def test_symbolic_batch_and_other_geometries() -> None:
    model = models.build("mobilenet_v3_small", num_classes=5, input_size=64, batch=None, in_channels=1)
    onnx.checker.check_model(model, full_check=True)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "N"
    x = np.random.default_rng(0).standard_normal((3, 1, 64, 64)).astype(np.float32)
    assert run_ort(model, x).shape == (3, 5)
    mnist = models.build("lenet5", input_size=28)
    assert run_ort(mnist, sample_input(mnist)).shape == (1, 10)


def test_too_small_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="too small"):
        models.build("alexnet", input_size=24)


def test_determinism_by_seed() -> None:
    a, b = (models.build("mobilenet_v3_small", input_size=32, seed=3) for _ in range(2))
    assert a.SerializeToString() == b.SerializeToString()
    c = models.build("mobilenet_v3_small", input_size=32, seed=4)
    assert a.graph.initializer[0].raw_data != c.graph.initializer[0].raw_data


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match="valid names: lenet5, alexnet"):
        models.build("vgg16")


def test_save_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from models.__main__ import main

    out = tmp_path / "lenet.onnx"
    main(["lenet5", str(out), "--input-size", "28", "--batch", "N"])
    model = onnx.load(out)
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]] == [1, 28, 28]
    assert capsys.readouterr().out == f"wrote {out} (lenet5, {out.stat().st_size:,} bytes)\n"
    models.save(small_model("resnet18"), out)
    assert onnx.load(out).graph.name == "resnet18"
    assert [p.name for p in tmp_path.iterdir()] == ["lenet.onnx"]


@pytest.mark.parametrize("name", [*models.ZOO, *models.TASKS, *models.SEQUENCE])
def test_every_builder_is_written_by_the_cli(name: str, tmp_path: Path) -> None:
    """Each name with only the options it takes (classic nets made small): no keyword its builder lacks."""
    from models.__main__ import main

    small = ["--num-classes", "10", "--input-size", str(SMALL_SIZE.get(name, 32))] if name in models.ZOO else []
    main([name, str(tmp_path / "m.onnx"), *small])
    onnx.checker.check_model(onnx.load(tmp_path / "m.onnx"))


def test_cli_refuses_an_option_the_builder_does_not_take(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from models.__main__ import main

    with pytest.raises(SystemExit):
        main(["streaming_gru", str(tmp_path / "s.onnx"), "--batch", "2"])
    assert "streaming_gru does not take --batch" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_written_models_have_an_ordinary_files_mode(tmp_path: Path, umask: int) -> None:
    """The zoo's ONNX and the converter's .ms get 0666 less the umask, as open() would (mkstemp alone: 0600)."""
    from converter.cli import main as convert

    previous = os.umask(umask)
    try:
        models.save(models.build("lenet5"), tmp_path / "lenet.onnx")
        assert convert(["--fmk=ONNX", f"--modelFile={tmp_path / 'lenet.onnx'}",
                        f"--outputFile={tmp_path / 'lenet'}"]) == 0
    finally:
        os.umask(previous)
    for written in ("lenet.onnx", "lenet.ms"):
        assert stat.S_IMODE((tmp_path / written).stat().st_mode) == 0o666 & ~umask


def check_training(model: onnx.ModelProto, x: np.ndarray) -> None:
    """Train mode uses batch statistics (and moves running statistics); gradients reach every parameter."""
    module = to_torch(model)
    inputs = torch.from_numpy(x)
    with torch.no_grad():
        evaluated = module.eval()(inputs)
    running = {k: b.clone() for k, b in module.constants.named_buffers()}
    logits = module.train()(inputs)
    ops = {n.op_type for n in model.graph.node}
    if ops & {"BatchNormalization", "Dropout"}:
        assert not torch.allclose(logits, evaluated, rtol=1e-3, atol=1e-3)
    if "BatchNormalization" in ops:
        assert any(not torch.equal(running[k], b) for k, b in module.constants.named_buffers())
    torch.nn.functional.cross_entropy(logits, torch.arange(logits.shape[0]) % logits.shape[1]).backward()
    missing = [name for name, p in module.onnx_parameters().items() if p.grad is None]
    assert not missing, f"no gradient for {missing}"
    assert all(torch.isfinite(p.grad).all() for p in module.parameters())


@pytest.mark.parametrize("name", list(models.ZOO))
def test_torch_training_mode(name: str) -> None:
    model = small_model(name)
    check_training(model, sample_input(model))


def test_torch_reference_names() -> None:
    module = to_torch(small_model("resnet18"))
    onnx_params = module.onnx_parameters()
    assert "layer1.0.conv1.weight" in onnx_params and "fc.bias" in onnx_params
    assert "layer1.0.bn1.running_mean" not in onnx_params
    assert set(module.onnx_names.values()) >= {t.name for t in small_model("resnet18").graph.initializer}


@pytest.mark.shared_data
@needs_lite0
def test_efficientnet_lite0_matches_onnxruntime() -> None:
    model = onnx.load(LITE0)
    x = sample_input(model)
    reference = run_ort(model, x)
    assert relative_error(run_torch(model, x), reference) < 1e-4


@pytest.mark.shared_data
@needs_lite0
def test_efficientnet_lite0_gradients() -> None:
    model = onnx.load(LITE0)
    module = to_torch(model).train()
    logits = module(torch.from_numpy(sample_input(model)))
    logits.logsumexp(dim=1).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in module.parameters())



def single_op_model(
    op: str, shapes: list[list[int]], constants: dict[str, np.ndarray | None], attrs: dict[str, object]
) -> onnx.ModelProto:
    """A one-node opset-13 graph: float inputs x0, x1, ... of ``shapes``, then initializer inputs ``constants``
    (None: an omitted optional input)."""
    from onnx import TensorProto, helper, numpy_helper

    inputs = [f"x{i}" for i in range(len(shapes))] + [k if v is not None else "" for k, v in constants.items()]
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], **attrs)],
        op,
        [helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, s) for i, s in enumerate(shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in constants.items() if v is not None],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def i64(*values: object) -> np.ndarray:
    return np.array(values, dtype=np.int64)


# case: (op, input shapes, initializer inputs, attributes) exercising attribute paths the zoo does not use
OP_CASES = {
    "lrn": ("LRN", [[2, 7, 3, 3]], {}, {"size": 3, "alpha": 0.3, "beta": 0.6, "bias": 1.5}),
    "conv_same_upper_grouped": (
        "Conv", [[1, 4, 7, 7], [6, 2, 3, 3]], {}, {"auto_pad": "SAME_UPPER", "strides": [2, 2], "group": 2}
    ),
    "conv_asymmetric_dilated": ("Conv", [[1, 3, 6, 6], [4, 3, 3, 3]], {}, {"pads": [0, 1, 2, 1], "dilations": [2, 1]}),
    "maxpool_ceil_asymmetric": (
        "MaxPool", [[1, 2, 7, 7]], {}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 0, 1], "ceil_mode": 1}
    ),
    "avgpool_exclude_pad": ("AveragePool", [[1, 2, 6, 6]], {}, {"kernel_shape": [3, 2], "pads": [1, 0, 2, 1]}),
    "avgpool_include_pad": (
        "AveragePool", [[1, 2, 6, 6]], {}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}
    ),
    "gemm_trans_alpha_beta": ("Gemm", [[4, 3], [5, 4], [5]], {}, {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    "hardsigmoid_default": ("HardSigmoid", [[3, 8]], {}, {}),
    "slice_negative_step": (
        "Slice", [[5, 6]], {"s": i64(-1, 4), "e": i64(-9, 0), "a": i64(0, 1), "t": i64(-2, -1)}, {}
    ),
    "gather_negative": ("Gather", [[4, 5]], {"i": np.array([[-1, 0], [2, -3]], dtype=np.int64)}, {"axis": 1}),
    "pad_reflect": ("Pad", [[1, 2, 4, 4]], {"p": i64(0, 0, 1, 2, 0, 0, 2, 1)}, {"mode": "reflect"}),
    "pad_edge": ("Pad", [[1, 2, 4, 4]], {"p": i64(0, 0, 0, 1, 0, 1, 2, 0)}, {"mode": "edge"}),
    "clip_max_only": ("Clip", [[3, 4]], {"min": None, "max": np.array(0.3, dtype=np.float32)}, {}),
    "flatten_axis_2": ("Flatten", [[2, 3, 4, 5]], {}, {"axis": 2}),
}


@pytest.mark.parametrize("case", list(OP_CASES))
def test_torch_reference_operator_semantics(case: str) -> None:
    model = single_op_model(*OP_CASES[case])
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(np.float32) for s in OP_CASES[case][1]]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    reference = session.run(None, {f"x{i}": x for i, x in enumerate(xs)})[0]
    with torch.no_grad():
        y = to_torch(model).eval()(*map(torch.from_numpy, xs)).numpy()
    assert y.shape == reference.shape
    np.testing.assert_allclose(y, reference, rtol=1e-5, atol=1e-5)
