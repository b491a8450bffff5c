"""MediaPipe's custom ops against LiteRT, whose XNNPACK delegate runs them: on MediaPipe's own models from the
`mediapipe` wheel (skipped without it) and on one-op models built here.

Which wheel files use which custom op (mediapipe 0.10.14):
- Convolution2DTransposeBias: selfie_segmentation.tflite, selfie_segmentation_landscape.tflite
- Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks: face_landmark_with_attention.tflite
  (LiteRT has no kernel for these three: checked against MediaPipe's own runtime in test_mediapipe_transforms.py)
- MaxPoolingWithArgmax2D, MaxUnpooling2D: no file of the wheel (checked on models built here)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
from converter import convert_tflite  # noqa: E402
from lite.status import NotSupportedError  # noqa: E402
from tests.converter.frontends.tflite.wild_models import WildModel, int_struct, run_litert_delegated  # noqa: E402
from tests.tflite_models import litert_interpreter, mediapipe_model, rand, run_ours  # noqa: E402
from tests.util import relative_to_range  # noqa: E402

SAME, VALID = 1, 2          # TfLitePadding, as MediaPipe's option structs store it


def _matches_litert(data: bytes, feeds: list[np.ndarray], tol: float = 1e-4) -> list[float]:
    expected, actual = run_litert_delegated(data, feeds), run_ours(data, feeds)
    assert [a.shape for a in actual] == [e.shape for e in expected]
    errors = [relative_to_range(a, e) for a, e in zip(actual, expected)]
    assert max(errors) <= tol, errors
    return errors


@pytest.mark.slow
@pytest.mark.parametrize("path", ["selfie_segmentation/selfie_segmentation.tflite",
                                  "selfie_segmentation/selfie_segmentation_landscape.tflite"])
def test_selfie_segmentation_matches_litert(path):
    data = mediapipe_model(path)
    interpreter = litert_interpreter().Interpreter(model_content=data)
    rng = np.random.default_rng(0)
    feeds = [rng.uniform(0, 1, d["shape"]).astype(np.float32) for d in interpreter.get_input_details()]
    _matches_litert(data, feeds)


@pytest.mark.parametrize("padding,strides,size", [(SAME, (2, 2), (5, 7)), (VALID, (2, 1), (4, 3)),
                                                  (SAME, (1, 3), (3, 4)), (VALID, (3, 3), (2, 2))])
def test_convolution_2d_transpose_bias(padding, strides, size):
    litert_interpreter()
    m = WildModel()
    x = m.tensor((1, *size, 3), name="x")
    w, b = m.const(rand(4, 3, 3, 3)), m.const(rand(4))
    (sh, sw), (h, wd) = strides, size
    out_hw = (h * sh, wd * sw) if padding == SAME else ((h - 1) * sh + 3, (wd - 1) * sw + 3)
    y = m.tensor((1, *out_hw, 4), name="y")
    m.custom("Convolution2DTransposeBias", [x, w, b], [y], int_struct(padding, sw, sh))
    _matches_litert(m.build([x], [y]), [rand(1, *size, 3)])


def test_short_options_are_refused_naming_the_op():
    m = WildModel()
    x, y = m.tensor((1, 2, 2, 3), name="x"), m.tensor((1, 4, 4, 4), name="y")
    m.custom("Convolution2DTransposeBias", [x, m.const(rand(4, 2, 2, 3)), m.const(rand(4))], [y], int_struct(1, 2))
    with pytest.raises(NotSupportedError, match=r"'CUSTOM:Convolution2DTransposeBias' at node 'y'.*custom options "
                                                r"hold 8 bytes, 12 expected"):
        convert_tflite(m.build([x], [y]))


def test_unknown_custom_op_names_the_known_ones():
    m = WildModel()
    x, y = m.tensor((2,), name="x"), m.tensor((2,), name="y")
    m.custom("MyOp", [x], [y])
    with pytest.raises(NotSupportedError, match="'CUSTOM:MyOp'.*custom ops with one: Convolution2DTransposeBias"):
        convert_tflite(m.build([x], [y]))


def _pool_params(padding: int, strides: tuple[int, int], kernel: tuple[int, int]) -> bytes:
    """TfLitePoolParams: padding, stride_w, stride_h, filter_w, filter_h, activation, computed padding (4)."""
    return int_struct(padding, strides[1], strides[0], kernel[1], kernel[0], 0, 0, 0, 0, 0)


def _argmax_model(size: tuple[int, int], padding: int, strides: tuple[int, int], kernel: tuple[int, int],
                  unpool: bool) -> bytes:
    m = WildModel()
    x = m.tensor((2, *size, 3), name="x")
    out = [-(-s // st) if padding == SAME else (s - k) // st + 1 for s, st, k in zip(size, strides, kernel)]
    y, argmax = m.tensor((2, *out, 3), name="y"), m.tensor((2, *out, 3), name="argmax")
    params = _pool_params(padding, strides, kernel)
    m.custom("MaxPoolingWithArgmax2D", [x], [y, argmax], params)
    outputs = [y, argmax]
    if unpool:
        restored = [(o - 1) * st + k for o, st, k in zip(out, strides, kernel)]
        z = m.tensor((2, *restored, 3), name="z")
        m.custom("MaxUnpooling2D", [y, argmax], [z], params)
        outputs.append(z)
    return m.build([x], outputs)


@pytest.mark.parametrize("size,padding,strides,kernel,unpool", [
    ((4, 6), VALID, (2, 2), (2, 2), True), ((5, 7), VALID, (2, 2), (2, 2), True),
    ((6, 6), VALID, (3, 2), (3, 2), True), ((5, 7), SAME, (2, 2), (2, 2), False),
    ((7, 6), SAME, (3, 2), (3, 2), False), ((7, 7), SAME, (3, 3), (3, 3), False),
    ((6, 9), VALID, (3, 3), (3, 3), True)])
def test_max_pooling_with_argmax_and_unpooling(size, padding, strides, kernel, unpool):
    """The maxima and unpooled maps within 1e-4 of the range, the argmax bits exact (LiteRT takes windows that
    do not overlap only: stride = filter)."""
    litert_interpreter()
    data = _argmax_model(size, padding, strides, kernel, unpool)
    feeds = [rand(2, *size, 3)]
    expected, actual = run_litert_delegated(data, feeds), run_ours(data, feeds)
    assert [a.shape for a in actual] == [e.shape for e in expected]
    assert np.array_equal(actual[1].view(np.int32), expected[1].view(np.int32))
    assert max(relative_to_range(a, e) for a, e in zip(actual[::2], expected[::2])) <= 1e-4


def test_same_unpooling_is_refused():
    m = WildModel()
    x, argmax, z = m.tensor((1, 2, 2, 1), name="x"), m.tensor((1, 2, 2, 1), name="argmax"), m.tensor((1, 4, 4, 1))
    m.custom("MaxUnpooling2D", [x, argmax], [z], _pool_params(SAME, (2, 2), (2, 2)))
    with pytest.raises(NotSupportedError, match="'CUSTOM:MaxUnpooling2D'.*SAME padding"):
        convert_tflite(m.build([x, argmax], [z]))
