"""Real `.tflite` files shipped by a PyPI package (MediaPipe 0.10's solution models: float16 weights behind
DEQUANTIZE, sparse ones behind DENSIFY, PRELU, PAD, resizes, DEPTH_TO_SPACE, ...) converted and compared with LiteRT within 1e-4 of each output's range.

The files are read from an installed `mediapipe` wheel without importing it (`pip install --no-deps
mediapipe==0.10.14` gives them); the tests skip when it is absent."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
from tests.tflite_models import litert_interpreter, mediapipe_model, run_litert, run_ours  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

litert_interpreter()


MODELS = ["face_detection/face_detection_short_range.tflite", "hand_landmark/hand_landmark_lite.tflite",
          "palm_detection/palm_detection_lite.tflite", "iris_landmark/iris_landmark.tflite",
          "face_detection/face_detection_full_range_sparse.tflite"]      # sparse weights behind DENSIFY


@pytest.mark.slow
@pytest.mark.parametrize("path", MODELS, ids=[Path(p).stem for p in MODELS])
def test_mediapipe_model_matches_litert(path):
    data = mediapipe_model(path)
    interpreter = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(-1, 1, d["shape"]).astype(d["dtype"]) for d in interpreter.get_input_details()]
    expected, actual = run_litert(data, feeds), run_ours(data, feeds)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape
        assert relative_to_range(a, e) <= 1e-4
