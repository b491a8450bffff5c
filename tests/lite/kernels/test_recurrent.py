"""LSTM, GRU and RNN against onnxruntime: directions, sequence_lens, initial states, layout, peepholes, clip,
input_forget, linear_before_reset and every activation ONNX allows (the official node tests cover the defaults)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from lite.status import InvalidOpAttrError, LiteError
from tests.util import assert_matches_oracles, run_lite, run_ort, session_for

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
T, B, I, H = 5, 3, 4, 6


def recurrent_model(op: str, direction: str = "forward", layout: int = 0, bias: bool = True, lens: bool = False,
                    initial: bool = False, peepholes: bool = False, seed: int = 0, **attrs) -> onnx.ModelProto:
    """One `op` node with constant weights; graph inputs X (and sequence_lens), every output. The layout 1 model
    holds the same weights and states as the layout 0 one, batch-major."""
    rng = np.random.default_rng(seed)
    d, g = (2 if direction == "bidirectional" else 1), GATES[op]
    batch_major = (lambda s: s.transpose(1, 0, 2)) if layout else (lambda s: s)
    inits = {"W": rng.standard_normal((d, g * H, I)) * 0.5, "R": rng.standard_normal((d, g * H, H)) * 0.5,
             "B": rng.standard_normal((d, 2 * g * H)) * 0.5 if bias else None,
             "initial_h": batch_major(rng.standard_normal((d, B, H))) if initial else None,
             "initial_c": batch_major(rng.standard_normal((d, B, H))) if initial and op == "LSTM" else None,
             "P": rng.standard_normal((d, 3 * H)) if peepholes else None}
    names = ["X", "W", "R", "B", "sequence_lens" if lens else "", "initial_h", "initial_c", "P"]
    names = [n if n in ("X", "sequence_lens") or inits.get(n) is not None else "" for n in names]
    names = names[:8 if op == "LSTM" else 6]
    while not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    x_shape = [T, B, I] if layout == 0 else [B, T, I]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)]
    if lens:
        graph_inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [B]))
    node = helper.make_node(op, names, outputs, name="rec", hidden_size=H, direction=direction,
                            **({"layout": layout} if layout else {}), **attrs)
    graph = helper.make_graph([node], "rec", graph_inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                                            for o in outputs],
                              [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()
                               if v is not None])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def feeds(layout: int = 0, lens: list[int] | None = None, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {"X": rng.standard_normal((T, B, I) if layout == 0 else (B, T, I)).astype(np.float32)}
    if lens is not None:
        out["sequence_lens"] = np.array(lens, np.int32)
    return out


def check(model: onnx.ModelProto, inputs: dict[str, np.ndarray], time_major: onnx.ModelProto | None = None) -> None:
    """Against onnxruntime; a layout 1 model (which onnxruntime refuses) against its time-major twin there."""
    if time_major is None:
        assert_matches_oracles(model, inputs, rtol=1e-4, atol=1e-5, oracles=("onnxruntime",))
        return
    got = run_lite(session_for(model), inputs)
    expected = run_ort(time_major, {k: v.transpose(1, 0, 2) if k == "X" else v for k, v in inputs.items()})
    np.testing.assert_allclose(got["Y"], expected["Y"].transpose(2, 0, 1, 3), rtol=1e-4, atol=1e-5)
    for name in expected.keys() - {"Y"}:
        np.testing.assert_allclose(got[name], expected[name].transpose(1, 0, 2), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_layouts_and_initial_states(op, direction, layout):
    twin = recurrent_model(op, direction, initial=True) if layout else None
    check(recurrent_model(op, direction, layout, initial=True), feeds(layout), twin)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_sequence_lens_of_mixed_lengths(op, direction):
    """Times past a sequence's length keep the state and give Y = 0; a reverse direction starts at len - 1."""
    check(recurrent_model(op, direction, lens=True, initial=True), feeds(lens=[5, 2, 3]))


def test_bidirectional_lstm_batchwise_with_sequence_lens_and_peepholes():
    args = dict(lens=True, initial=True, peepholes=True)
    check(recurrent_model("LSTM", "bidirectional", layout=1, **args), feeds(1, lens=[1, 5, 4]),
          recurrent_model("LSTM", "bidirectional", **args))


@pytest.mark.parametrize("op", GATES)
def test_clip_bounds_the_gate_inputs(op):
    check(recurrent_model(op, "bidirectional", clip=0.4), feeds())


def test_lstm_input_forget_couples_the_gates():
    check(recurrent_model("LSTM", peepholes=True, input_forget=1), feeds())


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_gru_linear_before_reset(direction):
    check(recurrent_model("GRU", direction, linear_before_reset=1, initial=True), feeds())


ACTIVATION_CASES = [
    (["Relu"], [], []), (["Affine"], [0.7], [0.2]), (["LeakyRelu"], [0.3], []), (["ThresholdedRelu"], [0.2], []),
    (["ScaledTanh"], [1.5], [0.7]), (["HardSigmoid"], [0.3], [0.4]), (["Elu"], [0.8], []), (["Softsign"], [], []),
    (["Softplus"], [], []), (["Sigmoid"], [], []),
]


@pytest.mark.parametrize("names,alpha,beta", ACTIVATION_CASES, ids=[c[0][0] for c in ACTIVATION_CASES])
def test_rnn_activations_with_alpha_and_beta(names, alpha, beta):
    attrs = dict(activations=names, **({"activation_alpha": alpha} if alpha else {}),
                 **({"activation_beta": beta} if beta else {}))
    check(recurrent_model("RNN", **attrs), feeds())


def test_activation_lists_per_direction_consume_alpha_beta_in_order():
    """LSTM bidirectional: six functions; alpha/beta go to the functions that take them, in order."""
    acts = ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "ScaledTanh", "LeakyRelu"]
    check(recurrent_model("LSTM", "bidirectional", activations=acts, activation_alpha=[0.25, 0.9, 0.1],
                          activation_beta=[0.45, 1.2]), feeds())


def test_gru_activations_default_alpha():
    check(recurrent_model("GRU", activations=["HardSigmoid", "Elu"]), feeds())


def test_bad_attributes_name_the_node():
    with pytest.raises(InvalidOpAttrError, match="rec.*activation 'swish'"):
        session_for(recurrent_model("RNN", activations=["Swish"]))
    with pytest.raises(InvalidOpAttrError, match="direction 'sideways'"):
        session_for(recurrent_model("GRU", direction="sideways"))


def test_out_of_range_sequence_lens_is_refused():
    session = session_for(recurrent_model("LSTM", lens=True))
    with pytest.raises(LiteError, match="sequence_lens"):
        run_lite(session, feeds(lens=[6, 1, 1]))


@pytest.mark.parametrize("opset", [7, 22])
@pytest.mark.parametrize("op", GATES)
def test_every_opset_imports(op, opset):
    model = recurrent_model(op, "bidirectional", lens=True)
    model.opset_import[0].version = opset
    check(model, feeds(lens=[4, 5, 1]))


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_streaming_steps_feed_their_states_back(op, direction):
    """A streaming model (Silero VAD's LSTM): one step a run with the states as graph inputs, the last states
    fed back into the next run; every run reads its new X and states (the prebound run of a compiled loop)."""
    rng = np.random.default_rng(2)
    d = 2 if direction == "bidirectional" else 1
    states = ["initial_h"] + (["initial_c"] if op == "LSTM" else [])
    names = ["X", "W", "R", "B", ""] + states
    weights = {"W": (d, GATES[op] * H, I), "R": (d, GATES[op] * H, H), "B": (d, 2 * GATES[op] * H)}
    node = helper.make_node(op, names, ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else []), hidden_size=H,
                            direction=direction)
    graph = helper.make_graph(
        [node], "stream", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
                           for n, s in [("X", [1, B, I])] + [(n, [d, B, H]) for n in states]],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in node.output],
        [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype(np.float32), n) for n, s in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    session = session_for(model)
    carried = {n: np.zeros((d, B, H), np.float32) for n in states}
    for _ in range(3):
        inputs = {"X": rng.standard_normal((1, B, I)).astype(np.float32), **carried}
        got, expected = run_lite(session, inputs), run_ort(model, inputs)
        for name in expected:
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5, err_msg=name)
        carried = {n: expected[o] for n, o in zip(states, ["Y_h", "Y_c"])}
