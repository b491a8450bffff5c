"""MediaPipe's landmark transform ops (Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks), which
LiteRT has no kernel for, checked two ways:

- the whole face_landmark_with_attention.tflite against MediaPipe's own runtime (its InferenceCalculator with its
  custom-op resolver), recorded on four crops of scikit-image's astronaut photo by `mediapipe_face_oracle.py`
  into `fixtures/face_landmark_with_attention_mediapipe.npz`: the lips, eyes and irises outputs each pass through
  all three ops;
- each op alone, on one-op models built here, against a per-pixel / per-landmark loop transcribing MediaPipe's
  documented math (and PyTorch's grid_sample for the bilinear sampling)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
from flatbuffers import flexbuffers  # noqa: E402

from converter import convert_tflite  # noqa: E402
from lite.status import NotSupportedError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel  # noqa: E402
from tests.tflite_models import mediapipe_model, run_ours  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

FIXTURE = Path(__file__).with_name("fixtures") / "face_landmark_with_attention_mediapipe.npz"
OUTPUTS = ("mesh", "lips", "left eye", "right eye", "left iris", "right iris", "face flag")


# ---- the whole model against MediaPipe ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def face_model() -> bytes:
    return convert_tflite(mediapipe_model("face_landmark/face_landmark_with_attention.tflite"))


@pytest.mark.parametrize("crop", ["upright", "shifted", "turned", "mirrored"])
def test_face_landmarks_with_attention_match_mediapipe(face_model, crop):
    skimage = pytest.importorskip("skimage.data", reason="the crops are of scikit-image's astronaut photo")
    from tests.converter.frontends.tflite.mediapipe_face_oracle import CROPS, crop as cut
    reference = np.load(FIXTURE)
    box = next(c[1:] for c in CROPS if c[0] == crop)
    image = cut(skimage.astronaut(), *box).astype(np.float32) / 255
    buf = face_model
    import lite
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
    session.GetInputs()[0].set_data(image[None])
    session.RunGraph()
    for k, (name, out) in enumerate(zip(OUTPUTS, session.GetOutputs().values())):
        expected = reference[f"{crop}/{k}"]
        actual = out.numpy().ravel()
        error = relative_to_range(actual, expected) if expected.size > 1 else abs(actual - expected).max() / abs(
            expected).max()
        assert error <= 1e-4, (name, error)


# ---- each op against its documented math ----------------------------------------------------------------------------
def _rotation(radians: float) -> np.ndarray:
    return np.array([[np.cos(radians), -np.sin(radians)], [np.sin(radians), np.cos(radians)]])


def reference_matrix(landmarks: np.ndarray, left: int, right: int, subset: list[int], out_w: int, out_h: int,
                     scale_x: float, scale_y: float, target: float) -> np.ndarray:
    """Landmarks2TransformMatrix v2 in float64, step by step as documented."""
    xy = landmarks[0, :, :2].astype(np.float64)
    r = target - np.arctan2(*(xy[right] - xy[left])[::-1])
    turned = xy[subset] @ _rotation(r).T
    low, high = turned.min(0), turned.max(0)
    centre = _rotation(-r) @ ((low + high) / 2)
    width, height = high - low

    def affine(m2: np.ndarray, shift: np.ndarray) -> np.ndarray:
        m = np.eye(4)
        m[:2, :2], m[:2, 3] = m2, shift
        return m
    t = affine(np.eye(2), centre) @ affine(_rotation(-r), np.zeros(2)) @ \
        affine(np.diag([scale_x * width / out_w, scale_y * height / out_h]), np.zeros(2)) @ \
        affine(np.eye(2), np.array([-out_w / 2, -out_h / 2]))
    return t[None]


def reference_bilinear(x: np.ndarray, m: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """TransformTensorBilinear v2: a loop over output pixels."""
    _, h, w, c = x.shape
    a, b = m[0, 0].astype(np.float64), m[0, 1].astype(np.float64)
    out = np.zeros((1, out_h, out_w, c))
    for v in range(out_h):
        for u in range(out_w):
            tx = a[0] * (u + 0.5) + a[1] * (v + 0.5) + a[3] - 0.5
            ty = b[0] * (u + 0.5) + b[1] * (v + 0.5) + b[3] - 0.5
            if not (0 <= tx <= w - 1 and 0 <= ty <= h - 1):
                continue
            x0, y0 = int(np.floor(tx)), int(np.floor(ty))
            fx, fy = tx - x0, ty - y0

            def at(yy: int, xx: int) -> np.ndarray:
                return x[0, yy, xx] if yy < h and xx < w else np.zeros(c)
            out[0, v, u] = (1 - fy) * ((1 - fx) * at(y0, x0) + fx * at(y0, x0 + 1)) + \
                fy * ((1 - fx) * at(y0 + 1, x0) + fx * at(y0 + 1, x0 + 1))
    return out


def _one_op(name: str, inputs: list[tuple[tuple[int, ...], str]], output: tuple[int, ...], options: dict) -> bytes:
    m = WildModel()
    ids = [m.tensor(shape, name=label) for shape, label in inputs]
    y = m.tensor(output, name="y")
    m.custom(name, ids, [y], flexbuffers.Dumps(options) if options else b"")
    return m.build(ids, [y])


def _face_like(n: int, seed: int, turn: float) -> np.ndarray:
    """n landmarks on a turned ellipse in a 48x48 frame, z random."""
    rng = np.random.default_rng(seed)
    angle = rng.uniform(0, 2 * np.pi, n)
    xy = np.stack([12 * np.cos(angle), 7 * np.sin(angle)], 1) @ _rotation(turn).T + 24 + rng.normal(0, 0.5, (n, 2))
    return np.concatenate([xy, rng.normal(0, 3, (n, 1))], 1)[None].astype(np.float32)


@pytest.mark.parametrize("turn,target,right", [(0.0, 0.0, 11), (0.6, 0.0, 11), (-2.5, 0.3, 11), (0.6, 0.2, 3)],
                         ids=["upright", "turned", "target", "coincident"])
def test_landmarks_to_transform_matrix_follows_its_math(turn, target, right):
    """("coincident": the rotation landmarks are one point, whose direction atan2 takes as 0.)"""
    options = dict(left_rotation_idx=3, right_rotation_idx=right, subset_idxs=[0, 3, 5, 7, 11, 12, 18, 19],
                   output_width=16, output_height=12, scale_x=1.5, scale_y=1.25, target_rotation_radians=target)
    data = _one_op("Landmarks2TransformMatrix", [((1, 20, 3), "landmarks")], (1, 4, 4), options)
    landmarks = _face_like(20, 1, turn)
    (actual,) = run_ours(data, [landmarks])
    expected = reference_matrix(landmarks, 3, right, options["subset_idxs"], 16, 12, 1.5, 1.25, target)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-4)


def test_transform_tensor_bilinear_follows_its_math_and_grid_sample():
    torch = pytest.importorskip("torch", reason="PyTorch's grid_sample is the second reference")
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (1, 9, 11, 3)).astype(np.float32)
    m = np.eye(4, dtype=np.float32)
    m[:2, :2] = 0.7 * _rotation(0.4)            # a turned crop reaching past the edges: some samples are outside
    m[:2, 3] = [2.5, -1.0]
    data = _one_op("TransformTensorBilinear", [((1, 9, 11, 3), "x"), ((1, 4, 4), "matrix")], (1, 8, 10, 3),
                   dict(output_height=8, output_width=10))
    (actual,) = run_ours(data, [x, m[None]])
    expected = reference_bilinear(x, m[None], 8, 10)
    assert (expected == 0).all(axis=-1).sum() >= 5          # outside points read 0
    np.testing.assert_allclose(actual, expected, atol=2e-5)
    v, u = np.meshgrid(np.arange(8) + 0.5, np.arange(10) + 0.5, indexing="ij")
    tx, ty = m[0, 0] * u + m[0, 1] * v + m[0, 3] - 0.5, m[1, 0] * u + m[1, 1] * v + m[1, 3] - 0.5
    grid = np.stack([2 * tx / 10 - 1, 2 * ty / 8 - 1], -1)[None].astype(np.float32)
    sampled = torch.nn.functional.grid_sample(torch.from_numpy(x).permute(0, 3, 1, 2), torch.from_numpy(grid),
                                              mode="bilinear", padding_mode="zeros", align_corners=True)
    inside = ((tx >= 0) & (tx <= 10) & (ty >= 0) & (ty <= 8))[None, ..., None]
    np.testing.assert_allclose(actual, sampled.permute(0, 2, 3, 1).numpy() * inside, atol=2e-5)


@pytest.mark.parametrize("dims", [2, 3])
def test_transform_landmarks_follows_its_math(dims):
    rng = np.random.default_rng(dims)
    landmarks = rng.normal(0, 8, (1, 7, dims)).astype(np.float32)
    m = np.eye(4, dtype=np.float32)
    m[:2, :2], m[:2, 3], m[2, 2] = 1.3 * _rotation(-0.8), [5.0, -3.0], 7.0     # z row ignored
    data = _one_op("TransformLandmarks", [((1, 7, dims), "landmarks"), ((1, 4, 4), "matrix")], (1, 7, dims), {})
    (actual,) = run_ours(data, [landmarks, m[None]])
    expected = landmarks.astype(np.float64).copy()
    expected[0, :, :2] = landmarks[0, :, :2] @ m[:2, :2].T + m[:2, 3]
    np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-5)


def test_missing_options_are_refused_naming_the_op():
    data = _one_op("TransformTensorBilinear", [((1, 4, 4, 1), "x"), ((1, 4, 4), "matrix")], (1, 2, 2, 1),
                   dict(output_height=2))
    with pytest.raises(NotSupportedError, match=r"'CUSTOM:TransformTensorBilinear' at node 'y'.*must hold "
                                                r"output_width, output_height"):
        convert_tflite(data)


def test_landmark_indices_beyond_the_input_are_refused():
    options = dict(left_rotation_idx=3, right_rotation_idx=40, subset_idxs=[0, 1], output_width=4, output_height=4,
                   scale_x=1.0, scale_y=1.0)
    data = _one_op("Landmarks2TransformMatrix", [((1, 20, 3), "landmarks")], (1, 4, 4), options)
    with pytest.raises(NotSupportedError, match=r"indices must lie in \[0, 20\)"):
        convert_tflite(data)
