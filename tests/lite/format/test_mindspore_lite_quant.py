"""Quantized `.ms` files of the official 2.0.0 converter in our runtime: full-quant (int8, calibrated) and
weight-quant files give the official runtime's outputs.

The fixtures in mindspore_lite_quant/ are the official full-quant files of the zoo's tiny_yolo and tiny_unet (NHWC
input; `tests.oracles.mindspore_lite.convert(..., calibration=...)` on four standard-normal samples of
`numpy.random.default_rng(0)`, then the input `x` drawn next), with the official runtime's raw output bytes for `x`:
they run without the official tools. The other tests convert and run with them, and skip where they are absent.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lite
import models
from lite.dtypes import DataType
from lite.format.mindspore_lite import writer
from tests.lite.format.test_mindspore_lite import assert_mutants_raise_only_lite_errors
from tests.oracles import mindspore_lite as official

FIXTURES = Path(__file__).with_name("mindspore_lite_quant")
SHAPES = {"lenet5": (1, 1, 32, 32), "mobilenet_v2": (1, 3, 224, 224), "tiny_yolo": (1, 3, 64, 64),
          "efficientnet_lite0": (1, 3, 224, 224),
          "kws_lstm": (1, 49, 40), "crnn": (1, 1, 32, 64)}
# the zoo models' ONNX input shapes


def run_ours(model: lite.Model, x: np.ndarray) -> list[np.ndarray]:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(model)
    [given] = session.GetInputs()
    given.set_data(x)
    session.RunGraph()
    return [out.numpy().copy() for out in session.GetOutputs().values()]


def int8_weights(model: lite.Model) -> int:
    return sum(t.is_const and t.data_type == DataType.INT8 and bool(t.quant_params) for t in model.tensors)


def assert_close(ours: list[np.ndarray], raw: bytes, tolerance: float) -> None:
    """Each of our outputs within `tolerance` of its range in the official runtime's outputs `raw` (integer
    outputs equal)."""
    for got, theirs in zip(ours, official.as_arrays(raw, ours), strict=True):
        if got.dtype.kind != "f":
            np.testing.assert_array_equal(got, theirs)
        else:
            assert np.abs(got - theirs).max() <= tolerance * max(float(np.ptp(theirs)), 1e-30)


@pytest.mark.parametrize("name", ["tiny_yolo", "tiny_unet"])
def test_official_int8_fixture_gives_the_official_outputs(name: str) -> None:
    """Measured: tiny_unet bit for bit; tiny_yolo's integer outputs equal and its float tail (sigmoid scores, box
    decoding after the int8 convolutions) within 1.7e-6 of the range."""
    model = lite.Model.Load(FIXTURES / f"{name}_int8.ms")
    assert int8_weights(model) >= 4
    ref = np.load(FIXTURES / f"{name}_int8.npz")
    assert_close(run_ours(model, ref["x"]), ref["official"].tobytes(), 1e-5)


@pytest.mark.parametrize("name", ["tiny_yolo", "tiny_unet"])
def test_official_int8_file_read_and_written_back_gives_unchanged_outputs(tmp_path: Path, name: str) -> None:
    """Our reader and writer keep the official int8 graph: the official runtime gives the same output bytes."""
    official.require()
    source = FIXTURES / f"{name}_int8.ms"
    model = lite.Model.Load(source)
    again = tmp_path / "again.ms"
    again.write_bytes(writer.write(model.name, model.tensors, model.nodes, model.inputs, model.outputs, [],
                                   model.fmk_type))
    x = np.load(FIXTURES / f"{name}_int8.npz")["x"]
    assert official.run(again, x) == official.run(source, x)


@pytest.mark.parametrize("name", ["tiny_yolo", "tiny_unet"])
def test_mutated_official_int8_files_raise_only_lite_errors(name: str) -> None:
    assert_mutants_raise_only_lite_errors((FIXTURES / f"{name}_int8.ms").read_bytes(), 150)


def ms_input(name: str, layout: str) -> tuple[int, ...]:
    shape = SHAPES[name]
    return (shape[0], *shape[2:], shape[1]) if layout == "NHWC" and len(shape) == 4 else shape


@pytest.fixture(scope="module")
def onnx_files(tmp_path_factory: pytest.TempPathFactory):
    official.require()
    folder = tmp_path_factory.mktemp("onnx")

    def get(name: str) -> Path:
        path = folder / f"{name}.onnx"
        if not path.exists():
            models.save(models.build(name), path)
        return path
    return get


def assert_official(path: Path, x: np.ndarray, tolerance: float) -> None:
    assert_close(run_ours(lite.Model.Load(path), x), official.run(path, x), tolerance)


@pytest.mark.parametrize("name, layout", [("lenet5", "NHWC"), ("lenet5", "NCHW"), ("mobilenet_v2", "NCHW"),
                                          ("tiny_yolo", "NHWC"), ("kws_lstm", "NHWC"),
                                          pytest.param("efficientnet_lite0", "NHWC", marks=pytest.mark.slow)])
def test_official_full_quant_file_matches_official_runtime(onnx_files, name: str, layout: str) -> None:
    """The official converter's int8 file (calibrated on four samples, its default MAX_MIN ranges and bias
    correction) runs in ours with the official runtime's outputs: measured bit for bit on LeNet, MobileNetV2,
    EfficientNet-Lite0 and the LSTM (left in float between QuantDTypeCasts); tiny_yolo's float tail within 1.7e-6
    of the range."""
    rng = np.random.default_rng(0)
    shape = ms_input(name, layout)
    path = official.convert(onnx_files(name), "input", SHAPES[name], layout,
                            calibration=rng.standard_normal((4, *shape)).astype(np.float32))
    assert int8_weights(lite.Model.Load(path)) >= 1
    assert_official(path, rng.standard_normal(shape).astype(np.float32), 1e-5)


@pytest.mark.parametrize("bits", [4, 8, 16])
@pytest.mark.parametrize("name", ["lenet5", "mobilenet_v2"])
def test_official_weight_quant_file_matches_official_runtime(onnx_files, name: str, bits: int) -> None:
    """Weights decoded as the official runtime decodes them (per channel with the converter's mean and variance
    corrections): measured MobileNetV2 bit for bit, LeNet within 3.9e-7 of the range."""
    path = official.convert(onnx_files(name), "input", SHAPES[name], "NHWC", bits)
    x = np.random.default_rng(1).standard_normal(ms_input(name, "NHWC")).astype(np.float32)
    assert_official(path, x, 1e-6)


@pytest.mark.parametrize("bits", [4, 8])
def test_mutated_official_weight_quant_files_raise_only_lite_errors(onnx_files, bits: int) -> None:
    """Bit-packed (4) and plain (8) integer weights with their per-channel corrections."""
    path = official.convert(onnx_files("lenet5"), "input", SHAPES["lenet5"], "NHWC", bits)
    assert_mutants_raise_only_lite_errors(path.read_bytes(), 150)
