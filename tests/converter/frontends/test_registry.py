"""The frontend registry (`converter.frontends`): `--fmk` picks a frontend, unknown ones and missing optional
packages are refused naming what is known or needed, and a new frontend (one module plus one `FRONTENDS` line,
here a toy format: an `.npz` of a dense layer's weights) converts, quantizes and trains with no other change."""
from __future__ import annotations

import io
import sys
import types
from typing import Collection

import numpy as np
import pytest

import lite
from converter import convert_file
from converter.cli import main as converter_lite
from converter.frontends import FRONTENDS, Frontend, frontend, read_model
from converter.frontends.emit import EmitContext
from converter.ir import Graph, Value
from converter.train import TrainParams
from schema import FMK_TYPES

BATCH = 4


class DenseSource:
    """y = x @ w + b, with x [BATCH, k]: the whole toy format."""
    fmk_type = next(k for k, v in FMK_TYPES.items() if v == "MS")

    def __init__(self, data: bytes):
        arrays = np.load(io.BytesIO(data))
        self.weights = {"w": arrays["w"], "b": arrays["b"]}

    def to_ir(self, input_shapes: dict[str, list[int]] | None = None,
              weights_as_inputs: Collection[str] = ()) -> Graph:
        graph = Graph("dense")
        graph.values["x"] = Value("x", (BATCH, self.weights["w"].shape[0]), np.dtype(np.float32))
        graph.inputs.append("x")
        for name, array in self.weights.items():
            graph.values[name] = Value(name, array.shape, array.dtype, None if name in weights_as_inputs else array)
        ctx = EmitContext(graph)
        ctx.name = "dense"
        ctx.emit("Add", [ctx.emit1("MatMul", ["x", "w"]), "b"], ["y"])
        graph.outputs = ["y"]
        return graph

    def float_weights(self) -> dict[str, np.ndarray]:
        return self.weights

    def weight_readers(self) -> list[tuple[str, list[str]]]:
        return [("dense", ["w", "b"])]


@pytest.fixture
def dense(monkeypatch, tmp_path):
    """The toy frontend registered as --fmk=NPZ, and a model file of it: (path, w, b)."""
    module = types.ModuleType("converter.frontends.npz_dense")
    module.load = lambda data, source: DenseSource(data)
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(FRONTENDS, "NPZ", Frontend("NPZ", "npz_dense", ""))
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((32, 24)).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    np.savez(tmp_path / "dense.npz", w=w, b=b)
    return tmp_path / "dense.npz", w, b


def test_unknown_fmk_names_the_known_ones(tmp_path, capsys):
    with pytest.raises(lite.NotSupportedError, match=r"--fmk=CAFFE is not supported: fmk must be ONNX\|TFLITE\|MINDIR"):
        frontend("CAFFE")
    assert converter_lite(["--fmk=TF", f"--modelFile={tmp_path / 'm.pb'}",
                           f"--outputFile={tmp_path / 'out'}"]) == lite.RET_NOT_SUPPORT
    assert "fmk must be ONNX|TFLITE|MINDIR" in capsys.readouterr().err


def test_a_missing_optional_package_is_named_with_its_install_command(monkeypatch):
    """Without the `tflite` package, --fmk=TFLITE says which package to install, not an ImportError."""
    for name in [m for m in sys.modules if m == "tflite" or m.startswith(("tflite.", "converter.frontends.tflite"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tflite", None)        # `import tflite` fails as when it is not installed
    with pytest.raises(lite.NotSupportedError) as info:
        frontend("TFLITE").load(b"TFL3")
    assert "--fmk=TFLITE needs the 'tflite' package (pip install 'mslite-py[tflite]')" in str(info.value)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(lite.GraphFileError, match="nope.tflite' does not exist"):
        read_model("TFLITE", tmp_path / "nope.tflite")


def run(path, x: np.ndarray) -> np.ndarray:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    session.CompileGraph(lite.Model.Load(path))
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    return session.GetOutputs()["y"].numpy()


def test_a_new_frontend_converts_with_its_framework_recorded(dense, tmp_path):
    path, w, b = dense
    out = convert_file(path, tmp_path / "float", fmk="NPZ")
    x = np.random.default_rng(1).standard_normal((BATCH, 32)).astype(np.float32)
    np.testing.assert_allclose(run(out, x), x @ w + b, rtol=1e-5, atol=1e-5)
    assert FMK_TYPES[lite.Model.Load(out).fmk_type] == "MS"


def test_a_new_frontend_quantizes(dense, tmp_path):
    from converter.quant import make_config
    path, w, b = dense
    out = convert_file(path, tmp_path / "wq", fmk="NPZ", quant_config=make_config(
        quant_type="WeightQuant", weight_bits=8, min_quant_weight_size=0, min_quant_weight_channel=0))
    assert any(t.is_const and t.data.dtype == np.int8 and t.quant_params for t in lite.Model.Load(out).tensors)
    x = np.random.default_rng(1).standard_normal((BATCH, 32)).astype(np.float32)
    want = x @ w + b
    assert np.abs(run(out, x) - want).max() < 0.02 * np.abs(want).max()


def test_a_new_frontend_trains(dense, tmp_path):
    path, w, b = dense
    out = convert_file(path, tmp_path / "train", fmk="NPZ", train_params=TrainParams(loss="mse", learning_rate=0.05))
    buf = open(out, "rb").read()
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(thread_num=1), True)
    assert [t.tensor_name() for t in session.GetFeatureMaps()] == ["w", "b"]
    rng = np.random.default_rng(2)
    x, target = rng.standard_normal((BATCH, 32)).astype(np.float32), rng.standard_normal((BATCH, 24)).astype(np.float32)
    losses = []
    for _ in range(5):
        session.GetInputsByTensorName("x").set_data(x)
        session.GetInputsByTensorName("labels").set_data(target)
        session.RunGraph()
        losses.append(float(session.GetOutputByTensorName("loss").numpy()))
    assert losses[0] == pytest.approx(float(((x @ w + b - target) ** 2).mean()), rel=1e-5)
    assert np.all(np.diff(losses) < 0)
