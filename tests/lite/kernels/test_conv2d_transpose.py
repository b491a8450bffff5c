"""Conv2DTranspose whose taps tile the output (kernel = stride: each output pixel one contribution, copied instead
of summed into a zeroed buffer) against onnxruntime, and the near cases that still sum."""
from __future__ import annotations

import pytest

from tests.lite.kernels.test_nn import _array, check

CASES = {
    "2x2_stride_2": ((1, 16, 6, 5), (16, 1, 2, 2), dict(strides=[2, 2])),          # MediaPipe's upsampling
    "3x2_strides_3_2_group": ((2, 4, 3, 4), (4, 3, 3, 2), dict(strides=[3, 2], group=2)),
    "tiles_then_cropped": ((1, 3, 4, 4), (3, 2, 2, 2), dict(strides=[2, 2], pads=[1, 0, 0, 1])),
    "output_padding": ((1, 3, 4, 4), (3, 2, 2, 2), dict(strides=[2, 2], output_padding=[1, 0])),   # a row unwritten
    "dilated": ((1, 3, 4, 4), (3, 2, 2, 2), dict(strides=[2, 2], dilations=[2, 1])),
}


@pytest.mark.parametrize("case", CASES)
def test_tiling_transposed_convs_match_onnxruntime(case: str) -> None:
    x, w, attrs = CASES[case]
    check("ConvTranspose", x, {"w": _array(w), "b": _array((w[1] * attrs.get("group", 1),))}, **attrs)
