"""UNIDIRECTIONAL_ / BIDIRECTIONAL_SEQUENCE_LSTM (and UNIDIRECTIONAL_SEQUENCE_RNN) against LiteRT: batch- and time-major, with and without
peepholes, CIFG, each fused activation we map, merged and separate bidirectional outputs, within 1e-4 of the
output range; what has no exact counterpart is refused naming the node."""
from __future__ import annotations

import numpy as np
import pytest

from converter import convert_tflite
from lite.status import GraphFileError, NotSupportedError
from tests.tflite_models import TFLiteModel, check, litert_interpreter, rand, run_litert, run_ours
from tests.util import relative_to_range

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()

T, B, I, H = 5, 3, 4, 6
TANH, RELU, NONE, RELU6 = 4, 1, 0, 3


def weights(m: TFLiteModel, inputs: list[int], offset: int, peephole: bool, cifg: bool,
            values: dict[int, np.ndarray] | None = None) -> None:
    """One direction's random gate tensors at inputs offset + 1 .. offset + 15 (TFLite's layout); `values`
    keeps them by input index, so that a second model can reuse them."""
    values = {} if values is None else values

    def const(k: int, *shape: int, scale: float) -> None:
        inputs[offset + k] = m.const(values.setdefault(offset + k, rand(*shape) * scale))
    for gate in range(4):
        if cifg and gate == 0:
            continue
        const(1 + gate, H, I, scale=0.7)
        const(5 + gate, H, H, scale=0.7)
        const(12 + gate, H, scale=0.5)
    if peephole:
        for k in (0, 1, 2):
            if not (cifg and k == 0):
                const(9 + k, H, scale=0.5)


def bidirectional_model(time_major: bool, merge: bool, peephole: bool = False, cifg: bool = False,
                        extra: dict[int, np.ndarray] | None = None,
                        values: dict[int, np.ndarray] | None = None) -> tuple[bytes, list[np.ndarray]]:
    """One BIDIRECTIONAL_SEQUENCE_LSTM: 48 inputs (forward 1-17, backward 18-34, states 35-38, auxiliary 39-47),
    one merged output or forward and backward outputs; `values` (by input index, 0 the input) shared."""
    m = TFLiteModel()
    shape = (T, B, I) if time_major else (B, T, I)
    values = {} if values is None else values
    x = values.setdefault(0, rand(*shape))
    inputs = [-1] * 48
    inputs[0] = m.tensor(shape, name="x")
    for offset in (0, 17):
        weights(m, inputs, offset, peephole, cifg, values)
    for k in (35, 36, 37, 38):
        inputs[k] = m.tensor((B, H), variable=True)
    for k, value in (extra or {}).items():
        inputs[k] = m.const(value)
    out_shape = (T, B) if time_major else (B, T)
    outs = ([m.tensor((*out_shape, 2 * H), name="y")] if merge else
            [m.tensor((*out_shape, H), name=f"y_{d}") for d in ("fw", "bw")])
    m.op("BIDIRECTIONAL_SEQUENCE_LSTM", inputs, outs, "BidirectionalSequenceLSTMOptions",
         FusedActivationFunction=TANH, TimeMajor=time_major, MergeOutputs=merge)
    return m.build([inputs[0]], outs), [x]


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
    weights(m, inputs, 0, peephole, cifg)
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
    (dict(state=True), "state input 18 must be a variable tensor without data"),
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


@pytest.mark.parametrize("time_major, merge", [(False, False), (True, False), (True, True)],
                         ids=["batch_major", "time_major", "time_major_merged"])
def test_bidirectional_matches_litert(time_major: bool, merge: bool) -> None:
    check(*bidirectional_model(time_major, merge))


def test_bidirectional_batch_major_merged_matches_litert_outputs_joined() -> None:
    """LiteRT's batch-major merged kernel is not deterministic (repeated invokes of one model differ, some
    with NaN), so the oracle is its two-output model on the same tensors, joined on the last axis."""
    values: dict[int, np.ndarray] = {}
    merged, feeds = bidirectional_model(False, True, values=values)
    split, _ = bidirectional_model(False, False, values=values)
    expected = np.concatenate(run_litert(split, feeds), axis=-1)
    assert relative_to_range(run_ours(merged, feeds)[0], expected) <= 1e-4


def test_bidirectional_peephole_cifg_matches_litert() -> None:
    check(*bidirectional_model(True, True, peephole=True, cifg=True))


def test_bidirectional_auxiliary_input_refused() -> None:
    data, _ = bidirectional_model(True, True, extra={39: rand(T, B, I)})
    with pytest.raises(NotSupportedError, match="BIDIRECTIONAL_SEQUENCE_LSTM.*node.*auxiliary input"):
        convert_tflite(data)


def rnn_model(time_major: bool, activation: int) -> tuple[bytes, list[np.ndarray]]:
    """One UNIDIRECTIONAL_SEQUENCE_RNN: input, weights [H, I], recurrent weights [H, H], bias [H], and the
    hidden state, a variable tensor."""
    m = TFLiteModel()
    shape = (T, B, I) if time_major else (B, T, I)
    x = m.tensor(shape, name="x")
    inputs = [x, m.const(rand(H, I) * 0.7), m.const(rand(H, H) * 0.7), m.const(rand(H) * 0.5),
              m.tensor((B, H), variable=True)]
    y = m.tensor((*shape[:2], H), name="y")
    m.op("UNIDIRECTIONAL_SEQUENCE_RNN", inputs, [y], "SequenceRNNOptions", TimeMajor=time_major,
         FusedActivationFunction=activation)
    return m.build([x], [y]), [rand(*shape)]


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("activation", [TANH, RELU, NONE])
def test_unidirectional_sequence_rnn_matches_litert(time_major, activation):
    check(*rnn_model(time_major, activation))


def test_unidirectional_sequence_rnn_with_relu6_is_refused():
    data, _ = rnn_model(False, RELU6)
    with pytest.raises(NotSupportedError, match="fused activation RELU6 is not supported"):
        convert_tflite(data)
