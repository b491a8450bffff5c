"""A float `.tflite` model quantizes like an ONNX one: MediaPipe's BlazeFace (face_detection_short_range: float16
weights behind DEQUANTIZE) converted by `converter_lite --fmk=TFLITE --quantType=PostTraining` with a calibration
config, with `--quantType=WeightQuant` and with `--fp16=on`, against LiteRT running the float file on photos the
calibration never saw.

Measured (astronaut / camera): PostTraining A8W8 with cross-layer equalization and bias correction, regressors
24.5 / 20.3 dB SQNR, classificators 16.9 / 19.4 dB; faces found (anchors scoring over 0.5) 8 of LiteRT's 8 / 5 of
its 7, none it does not find. WeightQuant W8 (per-channel int8 weights, a file of 158 KB against 428 KB):
regressors 27.9 / 31.6 dB, classificators 20.9 / 27.1 dB, the same faces found.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
import lite  # noqa: E402
from converter.cli import main as converter_lite  # noqa: E402
from models.imagenet import load_photo  # noqa: E402
from tests.tflite_models import litert_interpreter, mediapipe_model, run_litert  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

litert_interpreter()

MODEL = "face_detection/face_detection_short_range.tflite"
SIZE = 128
NO_FACES = ("chelsea", "coffee", "rocket", "hubble_deep_field", "immunohistochemistry", "retina", "colorwheel")


def _resized(image: np.ndarray, side: int) -> np.ndarray:
    """HWC uint8 -> [side, side, 3] float32 in [-1, 1], BlazeFace's input range."""
    from PIL import Image
    return np.asarray(Image.fromarray(image).resize((side, side), Image.BILINEAR), np.float32) / 127.5 - 1


def photo(name: str) -> np.ndarray:
    """The photo's top-left square as a [1, 128, 128, 3] input."""
    image = load_photo(name)
    side = min(image.shape[:2])
    return _resized(image[:side, :side], SIZE)[None]


def calibration_scenes(count: int, seed: int = 0) -> list[np.ndarray]:
    """Crops of photos without faces with one to three faces of scikit-image's LFW subset pasted in, 24 to 64
    pixels wide: faces the sizes that both anchor grids of BlazeFace (16x16 and 8x8) detect, so calibration sees
    the range of a detection's score."""
    import skimage.data
    faces, rng, scenes = skimage.data.lfw_subset()[:100], np.random.default_rng(seed), []
    for k in range(count):
        image = load_photo(NO_FACES[k % len(NO_FACES)])
        side = int(min(image.shape[:2]) * rng.uniform(0.5, 1.0))
        top, left = (int(rng.integers(0, d - side + 1)) for d in image.shape[:2])
        scene = _resized(image[top:top + side, left:left + side], SIZE)
        for j in range(1 + k % 3):
            width = int(rng.integers(24, 65))
            face = np.repeat((faces[(3 * k + j) % len(faces)] * 255).astype(np.uint8)[..., None], 3, axis=2)
            top, left = (int(rng.integers(0, SIZE - width + 1)) for _ in range(2))
            scene[top:top + width, left:left + width] = _resized(face, width)
        scenes.append(scene[None])
    return scenes


def ptq_config(folder: Path, samples: list[np.ndarray]) -> Path:
    """A MindSpore-style PTQ config over `samples` written as raw float32 `.bin` files."""
    data = folder / "calibration"
    data.mkdir()
    for k, x in enumerate(samples):
        x.tofile(data / f"{k}.bin")
    config = folder / "ptq.cfg"
    config.write_text("[common_quant_param]\nquant_type=FULL_QUANT\nbit_num=8\n\n"
                      f"[data_preprocess_param]\ncalibrate_path=input:{data}\ncalibrate_size={len(samples)}\n"
                      "input_type=BIN\n\n[full_quant_param]\nactivation_quant_method=MAX_MIN\nbias_correction=true\n"
                      "cross_layer_equalization=true\n")
    return config


def converted(tmp_path: Path, data: bytes, *flags: str) -> lite.LiteSession:
    source = tmp_path / "model.tflite"
    source.write_bytes(data)
    assert converter_lite(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={tmp_path / 'model'}",
                           *flags]) == lite.RET_OK
    model = lite.Model.Load(tmp_path / "model.ms")
    assert any(t.is_const and t.data.dtype == np.int8 and t.quant_params for t in model.tensors)
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(model)
    return session


def run(session: lite.LiteSession, x: np.ndarray) -> list[np.ndarray]:
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    return [t.numpy() for t in session.GetOutputs().values()]


def sqnr(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(10 * np.log10((expected.astype(np.float64) ** 2).sum() / ((actual - expected) ** 2).sum()))


@pytest.fixture(scope="module")
def blazeface() -> bytes:
    return mediapipe_model(MODEL)


@pytest.mark.slow
def test_post_training_int8_finds_the_faces_litert_finds_in_float(blazeface, tmp_path):
    session = converted(tmp_path, blazeface, "--quantType=PostTraining",
                        f"--configFile={ptq_config(tmp_path, calibration_scenes(16))}")
    for name, found in (("astronaut", 8), ("camera", 5)):
        x = photo(name)
        (regressors, scores), (want_regressors, want_scores) = run(session, x), run_litert(blazeface, [x])
        assert sqnr(regressors, want_regressors) > 18 and sqnr(scores, want_scores) > 14, name
        faces, want_faces = set(np.flatnonzero(scores > 0)), set(np.flatnonzero(want_scores > 0))
        assert faces <= want_faces and len(faces) >= found, (name, faces, want_faces)


@pytest.mark.slow
def test_weight_quant_finds_the_faces_litert_finds_in_float(blazeface, tmp_path):
    session = converted(tmp_path, blazeface, "--quantType=WeightQuant", "--bitNum=8")
    for name in ("astronaut", "camera"):
        x = photo(name)
        (regressors, scores), (want_regressors, want_scores) = run(session, x), run_litert(blazeface, [x])
        assert sqnr(regressors, want_regressors) > 25 and sqnr(scores, want_scores) > 18, name
        assert set(np.flatnonzero(scores > 0)) == set(np.flatnonzero(want_scores > 0)), name


@pytest.mark.slow
def test_fp16_storage_keeps_the_files_float16_weights_exactly(blazeface, tmp_path):
    """BlazeFace's weights are float16 in the file: `--fp16=on` stores them so again, losing nothing."""
    source = tmp_path / "model.tflite"
    source.write_bytes(blazeface)
    for name, flags in (("half", ["--fp16=on"]), ("full", [])):
        assert converter_lite(["--fmk=TFLITE", f"--modelFile={source}", f"--outputFile={tmp_path / name}",
                               *flags]) == lite.RET_OK
    assert (tmp_path / "half.ms").stat().st_size < 0.6 * (tmp_path / "full.ms").stat().st_size
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Load(tmp_path / "half.ms"))
    x = photo("astronaut")
    for got, want in zip(run(session, x), run_litert(blazeface, [x])):
        assert relative_to_range(got, want) <= 1e-4
