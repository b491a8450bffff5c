"""MediaPipe's custom ops against LiteRT, whose XNNPACK delegate runs them: on MediaPipe's own models from the
`mediapipe` wheel (skipped without it) and on one-op models built here.

Which wheel files use which custom op (mediapipe 0.10.14):
- Convolution2DTransposeBias: selfie_segmentation.tflite, selfie_segmentation_landscape.tflite
- Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks: face_landmark_with_attention.tflite
  (LiteRT has no kernel for these three: refused by name)
- MaxPoolingWithArgmax2D, MaxUnpooling2D: no file of the wheel."""
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


def test_landmark_ops_are_refused_by_name():
    data = mediapipe_model("face_landmark/face_landmark_with_attention.tflite")
    with pytest.raises(NotSupportedError, match="CUSTOM:Landmarks2TransformMatrix.*LiteRT has no kernel"):
        convert_tflite(data)


def test_unknown_custom_op_names_the_known_ones():
    m = WildModel()
    x, y = m.tensor((2,), name="x"), m.tensor((2,), name="y")
    m.custom("MyOp", [x], [y])
    with pytest.raises(NotSupportedError, match="'CUSTOM:MyOp'.*custom ops with one: Convolution2DTransposeBias"):
        convert_tflite(m.build([x], [y]))
