"""Real `.tflite` files shipped by a PyPI package (MediaPipe 0.10's solution models: float16 weights behind
DEQUANTIZE, sparse ones behind DENSIFY, PRELU, PAD, resizes, DEPTH_TO_SPACE, ...) converted and compared with LiteRT within 1e-4 of each output's range.

The files are read from an installed `mediapipe` wheel without importing it (`pip install --no-deps
mediapipe==0.10.14` gives them); the tests skip when it is absent."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.tflite_models import litert_interpreter, run_litert, run_ours
from tests.util import relative_to_range

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()


def mediapipe_models() -> Path | None:
    spec = importlib.util.find_spec("mediapipe")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "modules"
    return root if root.is_dir() else None


MODELS = ["face_detection/face_detection_short_range.tflite", "hand_landmark/hand_landmark_lite.tflite",
          "palm_detection/palm_detection_lite.tflite", "iris_landmark/iris_landmark.tflite",
          "face_detection/face_detection_full_range_sparse.tflite"]      # sparse weights behind DENSIFY


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=[Path(p).stem for p in MODELS])
def test_mediapipe_model_matches_litert(path):
    root = mediapipe_models()
    if root is None or not (root / path).exists():
        pytest.skip(f"{path} needs the model files of mediapipe 0.10 (pip install --no-deps mediapipe==0.10.14)")
    data = (root / path).read_bytes()
    interpreter = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]) for d in interpreter.get_input_details()]
    expected, actual = run_litert(data, feeds), run_ours(data, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert relative_to_range(a, e) <= 1e-4
