"""The task models of the zoo (a YOLO-style detector and a U-Net-style segmenter, built in PyTorch and exported with
torch.onnx.export) convert with converter_lite and match onnxruntime.

The detector's NonMaxSuppression selects over run-time boxes, so it runs through run-time shape inference."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import lite
import models
from converter.cli import main
from converter.frontends.onnx import supported_ops
from tests.util import relative_to_range, run_lite, run_ort

TOLERANCE = 1e-4     # of the output's range


def test_every_op_of_the_task_models_has_an_importer_rule(detector, segmenter):
    for model in (detector, segmenter):
        assert {n.op_type for n in model.graph.node} <= set(supported_ops())


@pytest.fixture(scope="module")
def detector():
    return models.build("tiny_yolo", batch=None)


@pytest.fixture(scope="module")
def segmenter():
    return models.build("tiny_unet", batch=None)


def converted(model: onnx.ModelProto, shape: tuple[int, ...], tmp_path, capsys) -> lite.LiteSession:
    """`model` converted by converter_lite for inputs of `shape` to a .ms file, loaded into a new session."""
    models.save(model, tmp_path / "model.onnx")
    code = main(["--fmk=ONNX", f"--modelFile={tmp_path / 'model.onnx'}", f"--outputFile={tmp_path / 'model'}",
                 f"--inputShape=input:{','.join(map(str, shape))}"])
    assert code == 0 and "CONVERT RESULT SUCCESS:0" in capsys.readouterr().out
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(lite.Model.Load(tmp_path / "model.ms"))
    return session


def test_detector_generates_anchors_and_decodes_with_the_detection_ops(detector):
    ops = {n.op_type for n in detector.graph.node}
    assert {"Range", "Expand", "Sigmoid", "Where", "TopK", "GatherElements", "NonMaxSuppression"} <= ops


def test_segmenter_uses_instance_norm_resize_and_argmax(segmenter):
    assert {"InstanceNormalization", "Resize", "ArgMax"} <= {n.op_type for n in segmenter.graph.node}


@pytest.mark.parametrize("batch, size", [(1, 64), (2, 48)])
def test_detector_matches_onnxruntime(detector, batch, size, tmp_path, capsys):
    x = np.random.default_rng(size).standard_normal((batch, 3, size, size)).astype(np.float32)
    got, want = run_lite(converted(detector, x.shape, tmp_path, capsys), {"input": x}), run_ort(detector, {"input": x})
    assert relative_to_range(got["boxes"], want["boxes"]) <= TOLERANCE
    assert relative_to_range(got["scores"], want["scores"]) <= TOLERANCE
    np.testing.assert_array_equal(got["labels"], want["labels"])
    np.testing.assert_array_equal(got["selected"], want["selected"])


@pytest.mark.parametrize("batch, size", [(1, 32), (3, 32)])   # the export fixes 32x32; the batch is free
def test_segmenter_matches_onnxruntime(segmenter, batch, size, tmp_path, capsys):
    x = np.random.default_rng(size).standard_normal((batch, 3, size, size)).astype(np.float32)
    got, want = run_lite(converted(segmenter, x.shape, tmp_path, capsys), {"input": x}), run_ort(segmenter, {"input": x})
    assert relative_to_range(got["logits"], want["logits"]) <= TOLERANCE
    top2 = np.sort(want["logits"], axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-3           # pixels whose class is not a near-tie
    assert clear.mean() > 0.95
    np.testing.assert_array_equal(got["mask"][clear], want["mask"][clear])
