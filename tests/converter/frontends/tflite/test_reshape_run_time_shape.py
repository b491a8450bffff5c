"""RESHAPE whose shape is computed at run time from a dynamic batch (SHAPE -> STRIDED_SLICE -> PACK), as the TF
converter writes Keras's `tf.reshape(t, [tf.shape(x)[0], 1, 1, 1])` (Basic Pitch's normalized log): it converts
and runs at any batch within float rounding of LiteRT, with the dims after it known at conversion (a convolution
follows it)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
from converter import convert_tflite  # noqa: E402
from tests.tflite_models import TFLiteModel, check, rand, run_litert, session_of  # noqa: E402

BATCH = -1
I32 = np.int32


def normalized_conv(recorded: list[int] | None = None) -> bytes:
    """x [b, 4, 4, 3] minus its per-example minimum, reshaped to [b, 1, 1, 1] by a shape packed from SHAPE(x)[0],
    then a 3x3 SAME convolution, and a reshape of its output to its own SHAPE. `recorded` is the shape signature the
    file gives the minimum's reshape (default [-1, 1, 1, 1])."""
    m = TFLiteModel()
    sig = lambda *dims: [BATCH, *dims]                                      # noqa: E731
    x = m.tensor([1, 4, 4, 3], name="x", signature=sig(4, 4, 3))
    low = m.tensor([1], name="min", signature=sig())
    m.op("REDUCE_MIN", [x, m.const(np.array([1, 2, 3], I32))], [low], "ReducerOptions", KeepDims=False)
    shape_of_x, batch = m.tensor([4], I32, name="shape_of_x"), m.tensor([], I32, name="batch")
    m.op("SHAPE", [x], [shape_of_x], "ShapeOptions", OutType=2)
    m.op("STRIDED_SLICE", [shape_of_x, *(m.const(np.array([v], I32)) for v in (0, 1, 1))], [batch],
         "StridedSliceOptions", ShrinkAxisMask=1)
    one = m.const(np.array(1, I32))
    target = m.tensor([4], I32, name="target")
    m.op("PACK", [batch, one, one, one], [target], "PackOptions", ValuesCount=4, Axis=0)
    low4 = m.tensor([1, 1, 1, 1], name="min4", signature=recorded or sig(1, 1, 1))
    m.op("RESHAPE", [low, target], [low4])
    shifted = m.tensor([1, 4, 4, 3], name="shifted", signature=sig(4, 4, 3))
    m.op("SUB", [x, low4], [shifted], "SubOptions")
    w = np.random.default_rng(3).standard_normal((2, 3, 3, 3)).astype(np.float32)
    conv = m.tensor([1, 4, 4, 2], name="conv", signature=sig(4, 4, 2))
    m.op("CONV_2D", [shifted, m.const(w), m.const(rand(2))], [conv], "Conv2DOptions", Padding=0, StrideW=1,
         StrideH=1)
    shape_of_conv = m.tensor([4], I32, name="shape_of_conv")
    y = m.tensor([1, 4, 4, 2], name="y", signature=sig(4, 4, 2))
    m.op("SHAPE", [conv], [shape_of_conv], "ShapeOptions", OutType=2)
    m.op("RESHAPE", [conv, shape_of_conv], [y])
    return m.build([x], [y])


@pytest.mark.parametrize("batch", [1, 3])
def test_a_shape_packed_from_the_dynamic_batch(batch):
    check(normalized_conv(), [rand(batch, 4, 4, 3)], tol=1e-5)


def test_a_batch_given_at_conversion():
    """Converted with the batch given, SHAPE folds and the shape is a constant."""
    data, x = normalized_conv(), rand(2, 4, 4, 3)
    session = session_of(data, {"x": [2, 4, 4, 3]})
    session.GetInputs()[0].set_data(x)
    session.RunGraph()
    (y,) = session.GetOutputs().values()
    (expected,) = run_litert(data, [x])
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_a_shape_left_to_run_time_where_the_file_records_two_unknown_dims():
    """A recorded shape with two unknown dims cannot stand in for the computed one: the shape stays a run-time
    input, and the convolution after it, which needs its input's channels, is refused naming itself."""
    import lite
    with pytest.raises(lite.LiteError, match="CONV_2D"):
        convert_tflite(normalized_conv(recorded=[BATCH, -1, 1, 1]))


BASIC_PITCH = "saved_models/icassp_2022/nmp.tflite"


def test_basic_pitch_runs_within_float_rounding_of_litert():
    """The real Basic Pitch .tflite (package basic-pitch), whose normalized log reshapes its minimum and maximum
    by a shape packed from the dynamic batch, at batch 1 and 2. Its log of small squares amplifies rounding: on
    the batch-2 input LiteRT's XNNPACK and builtin kernels differ by 1.7e-4 of the output range."""
    basic_pitch = pytest.importorskip("basic_pitch", reason="the real model comes with the basic-pitch package")
    path = Path(basic_pitch.__file__).parent / BASIC_PITCH
    if not path.is_file():
        pytest.skip(f"basic-pitch has no {BASIC_PITCH}")
    for batch in (1, 2):
        x = np.random.default_rng(batch).uniform(-1, 1, (batch, 43844, 1)).astype(np.float32)
        check(path.read_bytes(), [x], tol=3e-4)


def test_a_shape_fed_at_run_time():
    """A shape that is a graph input stays a run-time input (int32, as TFLite feeds it)."""
    m = TFLiteModel()
    x, shape = m.tensor([2, 6], name="x"), m.tensor([3], I32, name="shape")
    y = m.tensor([3, 2, 2], name="y", signature=[-1, -1, -1])
    m.op("RESHAPE", [x, shape], [y])
    (out,) = check(m.build([x, shape], [y]), [rand(2, 6), np.array([3, -1, 2], I32)], tol=0)
    assert out.shape == (3, 2, 2)
