"""The signal ops (DFT, STFT, windows, MelWeightMatrix) against the official node tests and onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from tests.node_cases import node_cases, run_case
from tests.util import run_lite, run_ort, session_for

RNG = np.random.default_rng(7)
# (node test prefix, how many leading inputs stay graph inputs; the rest are parameters, frozen as constants)
OFFICIAL = [("dft", 1), ("stft", 1), ("hannwindow", 0), ("hammingwindow", 0), ("blackmanwindow", 0),
            ("melweightmatrix", 0)]


@pytest.mark.parametrize("case", [(*c, keep) for prefix, keep in OFFICIAL for c in node_cases(prefix)
                                  if not c[0].endswith("_expanded")], ids=lambda c: c[0])
def test_official_cases_with_constant_parameters(case) -> None:
    _, model, inputs, expected, keep = case
    for got, want in zip(run_case(model, inputs, keep), expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _model(op: str, feeds: dict[str, np.ndarray], consts: dict[str, np.ndarray], inputs: list[str], opset: int,
           out_type: int = TensorProto.FLOAT, **attrs) -> onnx.ModelProto:
    node = helper.make_node(op, inputs, ["y"], name=op.lower(), **attrs)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                     for n, a in feeds.items()],
        [helper.make_tensor_value_info("y", out_type, None)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _matches_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray], tol: float = 2e-4) -> None:
    want = run_ort(model, feeds)["y"]
    got = run_lite(session_for(model), feeds)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


DFT_CASES = {   # x shape, dft_length, attributes
    "real": ((2, 16, 3, 1), None, {}),
    "complex_padded": ((2, 16, 3, 2), 20, {}),
    "complex_truncated_inverse": ((2, 16, 3, 2), 12, dict(inverse=1)),
    "onesided": ((3, 15, 1), None, dict(onesided=1)),
    "onesided_padded": ((3, 15, 1), 18, dict(onesided=1)),
}


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("case", DFT_CASES)
def test_dft_matches_onnxruntime(case: str, opset: int) -> None:
    shape, length, attrs = DFT_CASES[case]
    feeds = {"x": RNG.standard_normal(shape).astype(np.float32)}
    consts = {"len": np.array(length or shape[1], np.int64)}
    if opset == 20:
        consts["axis"] = np.array(1, np.int64)
    else:
        attrs = dict(attrs, axis=1)
    _matches_ort(_model("DFT", feeds, consts, ["x", *consts], opset, **attrs), feeds)


@pytest.mark.parametrize("onesided", [0, 1])
def test_stft_with_hann_window_matches_onnxruntime(onesided: int) -> None:
    feeds = {"signal": RNG.standard_normal((2, 100, 1)).astype(np.float32)}
    consts = {"step": np.array(7, np.int64), "window": np.hanning(16).astype(np.float32)}
    _matches_ort(_model("STFT", feeds, consts, ["signal", "step", "window"], 17, onesided=onesided), feeds)


def test_stft_of_complex_signal_with_frame_length_matches_onnxruntime() -> None:
    feeds = {"signal": RNG.standard_normal((1, 64, 2)).astype(np.float32)}
    consts = {"step": np.array(8, np.int64), "length": np.array(10, np.int64)}
    _matches_ort(_model("STFT", feeds, consts, ["signal", "step", "", "length"], 17, onesided=0), feeds)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows_match_onnxruntime(op: str, periodic: int) -> None:
    model = _model(op, {}, {"size": np.array(13, np.int64)}, ["size"], 17, TensorProto.DOUBLE, periodic=periodic,
                   output_datatype=TensorProto.DOUBLE)
    want = run_ort(model, {})["y"]
    got = run_lite(session_for(model), {})["y"]
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, atol=1e-7)     # onnxruntime holds the coefficients as float32


def test_mel_weight_matrix_matches_onnxruntime() -> None:
    consts = {"bins": np.array(10, np.int64), "length": np.array(64, np.int64), "rate": np.array(8000, np.int64),
              "low": np.array(100, np.float32), "high": np.array(3500, np.float32)}
    model = _model("MelWeightMatrix", {}, consts, list(consts), 17)
    np.testing.assert_allclose(run_lite(session_for(model), {})["y"], run_ort(model, {})["y"], atol=1e-6)


def test_dft_along_the_complex_axis_is_an_attribute_error() -> None:
    feeds = {"x": np.zeros((2, 8, 1), np.float32)}
    with pytest.raises(lite.InvalidOpAttrError, match="DFT node 'dft'.*axis 2") as e:
        convert(_model("DFT", feeds, {}, ["x"], 17, axis=2))
    assert e.value.status == lite.RET_INVALID_OP_ATTR


def test_stft_frame_longer_than_the_signal_is_an_attribute_error() -> None:
    feeds = {"signal": np.zeros((1, 8, 1), np.float32)}
    consts = {"step": np.array(2, np.int64), "length": np.array(9, np.int64)}
    with pytest.raises(lite.InvalidOpAttrError, match="STFT node 'stft'.*frame_length"):
        convert(_model("STFT", feeds, consts, ["signal", "step", "", "length"], 17))
