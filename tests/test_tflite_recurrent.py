"""UNIDIRECTIONAL_SEQUENCE_LSTM against LiteRT: batch- and time-major, with and without peepholes, CIFG, each
fused activation we map, within 1e-4 of the output range; what has no exact
counterpart is refused naming the node."""
from __future__ import annotations

import numpy as np
import pytest

from converter import convert_tflite
from lite.status import GraphFileError, NotSupportedError
from tests.tflite_models import TFLiteModel, check, litert_interpreter, rand

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()

T, B, I, H = 5, 3, 4, 6
TANH, RELU, NONE, RELU6 = 4, 1, 0, 3


def lstm_model(time_major: bool = False, peephole: bool = False, cifg: bool = False, activation: int = TANH,
               state: bool = False, extra: dict[int, np.ndarray] | None = None, drop: tuple[int, ...] = (),
               **options) -> tuple[bytes, list[np.ndarray]]:
    """One UNIDIRECTIONAL_SEQUENCE_LSTM: 24 inputs, the weights random constants, the states variable tensors
    (given data with `state`, which LiteRT refuses); `extra` fills optional inputs by index, `drop` omits some."""
    m = TFLiteModel()
    shape = (T, B, I) if time_major else (B, T, I)
    x = rand(*shape)
    inputs = [-1] * 24
    inputs[0] = m.tensor(shape, name="x")
    for gate in range(4):
        if cifg and gate == 0:
            continue
        inputs[1 + gate] = m.const(rand(H, I) * 0.7)
        inputs[5 + gate] = m.const(rand(H, H) * 0.7)
        inputs[12 + gate] = m.const(rand(H) * 0.5)
    if peephole:
        for k in (0, 1, 2):
            if not (cifg and k == 0):
                inputs[9 + k] = m.const(rand(H) * 0.5)
    for k in (18, 19):
        inputs[k] = m.tensor((B, H), variable=True, data=rand(B, H) if state else None)
    for k, value in (extra or {}).items():
        inputs[k] = m.const(value)
    for k in drop:
        inputs[k] = -1
    out = m.tensor((T, B, H) if time_major else (B, T, H), name="y")
    m.op("UNIDIRECTIONAL_SEQUENCE_LSTM", inputs, [out], "UnidirectionalSequenceLSTMOptions",
         FusedActivationFunction=activation, TimeMajor=time_major, **options)
    return m.build([inputs[0]], [out]), [x]


@pytest.mark.parametrize("time_major", [False, True], ids=["batch_major", "time_major"])
@pytest.mark.parametrize("peephole", [False, True], ids=["plain", "peephole"])
def test_lstm_matches_litert(time_major: bool, peephole: bool) -> None:
    check(*lstm_model(time_major, peephole))


@pytest.mark.parametrize("peephole", [False, True], ids=["plain", "peephole"])
def test_cifg_matches_litert(peephole: bool) -> None:
    check(*lstm_model(peephole=peephole, cifg=True))


def test_relu_activation_matches_litert() -> None:
    check(*lstm_model(time_major=True, activation=RELU))


@pytest.mark.parametrize("case, message", [
    (dict(CellClip=3.0), "cell_clip"),
    (dict(activation=RELU6), "fused activation RELU6"),
    (dict(activation=NONE), "fused activation NONE"),
    (dict(state=True), "output_state .* variable tensor without data"),
    (dict(extra={16: rand(H, H)}), "projection weights"),
    (dict(extra={21: rand(H)}), "forget layer-norm"),
], ids=["cell_clip", "relu6", "none", "constant_state", "projection", "layer_norm"])
def test_refused_with_named_node(case: dict, message: str) -> None:
    data, _ = lstm_model(**case)
    with pytest.raises(NotSupportedError, match=f"UNIDIRECTIONAL_SEQUENCE_LSTM.*node.*{message}"):
        convert_tflite(data)


def test_missing_gate_weights_refused() -> None:
    data, _ = lstm_model(extra={}, drop=(7,))
    with pytest.raises(GraphFileError, match="node.*input 7"):
        convert_tflite(data)
