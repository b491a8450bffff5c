"""Backpropagation through time of LSTM, GRU and RNN, through the training graph (bprop rule, saved gates and
states, gradient kernels): every weight's gradient and the input's against PyTorch autograd in float64, both
`nn.LSTM` / `nn.GRU` / `nn.RNN` (bidirectional too) and ONNX's equations written in torch for the options PyTorch
lacks (peepholes, clip, input_forget, linear_before_reset = 0, sequence_lens, other activations)."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert_for_training
from converter.train import TrainParams
from tests.oracles.torch_autograd import rel

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
T, B, I, H = 4, 3, 5, 4
INPUTS = ("W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def arrays(op: str, d: int, seed: int = 0, peepholes: bool = False, lens: list[int] | None = None,
           initial: bool = True) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    g = GATES[op]
    out = {"Xw": rng.standard_normal((T, B, I)), "W": rng.standard_normal((d, g * H, I)) * 0.5,
           "R": rng.standard_normal((d, g * H, H)) * 0.5, "B": rng.standard_normal((d, 2 * g * H)) * 0.3}
    if lens is not None:
        out["sequence_lens"] = np.array(lens, np.int32)
    if initial:
        out["initial_h"] = rng.standard_normal((d, B, H))
        if op == "LSTM":
            out["initial_c"] = rng.standard_normal((d, B, H))
    if peepholes:
        out["P"] = rng.standard_normal((d, 3 * H)) * 0.5
    return {k: v if v.dtype == np.int32 else v.astype(np.float32) for k, v in out.items()}


def batch_major(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The layout 1 form of X and the initial states."""
    return {k: v.transpose(1, 0, 2).copy() if k in ("Xw", "initial_h", "initial_c") else v for k, v in values.items()}


def model(op: str, values: dict[str, np.ndarray], direction: str, **attrs) -> onnx.ModelProto:
    """Z + Xw -> op -> Y, Y_h[, Y_c] flattened and concatenated into `pred` [1, N] (every output reaches the loss;
    Xw is a weight, so its gradient is dX)."""
    names = ["X"] + [n if n in values else "" for n in INPUTS[:7 if op == "LSTM" else 5]]
    while not names[-1]:
        names.pop()
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    nodes = [helper.make_node("Add", ["Z", "Xw"], ["X"]),
             helper.make_node(op, names, outputs, name="rec", hidden_size=H, direction=direction, **attrs)]
    nodes += [helper.make_node("Flatten", [o], [o + "_flat"], axis=0) for o in outputs]
    nodes.append(helper.make_node("Concat", [o + "_flat" for o in outputs], ["pred"], axis=1))
    n = sum(T * B * H * (2 if direction == "bidirectional" else 1) if o == "Y" else 0 for o in outputs)
    n += (len(outputs) - 1) * B * H * (2 if direction == "bidirectional" else 1)
    graph = helper.make_graph(nodes, "rec", [helper.make_tensor_value_info("Z", TensorProto.FLOAT,
                                                                           list(values["Xw"].shape))],
                              [helper.make_tensor_value_info("pred", TensorProto.FLOAT, [1, n])],
                              [numpy_helper.from_array(v, k) for k, v in values.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def lite_step(m: onnx.ModelProto, labels: np.ndarray) -> tuple[float, dict[str, np.ndarray]]:
    buf = convert_for_training(m, TrainParams(loss="mse", optimizer="sgd", learning_rate=0.01))
    session = lite.TrainSession.CreateSession(buf, len(buf), lite.Context(), train_mode=True)
    z = session.GetInputsByTensorName("Z")
    z.set_data(np.zeros(z.shape(), np.float32))
    session.GetInputsByTensorName("labels").set_data(labels.astype(np.float32))
    session.RunGraph()
    return float(session.GetOutputByTensorName("loss").numpy()), \
        {t.tensor_name(): t.numpy() for t in session.GetGradients()}


# ---- ONNX's equations in torch --------------------------------------------------------------------------------------
TORCH_ACTS = {
    "Sigmoid": lambda x, a, b: torch.sigmoid(x), "Tanh": lambda x, a, b: torch.tanh(x),
    "Relu": lambda x, a, b: torch.relu(x), "Affine": lambda x, a, b: a * x + b,
    "LeakyRelu": lambda x, a, b: torch.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: torch.where(x > a, x, 0.0), "ScaledTanh": lambda x, a, b: a * torch.tanh(b * x),
    "HardSigmoid": lambda x, a, b: torch.clamp(a * x + b, 0, 1),
    "Elu": lambda x, a, b: torch.where(x >= 0, x, a * torch.expm1(torch.clamp(x, max=0))),
    "Softsign": lambda x, a, b: x / (1 + x.abs()), "Softplus": lambda x, a, b: F.softplus(x),
}


def onnx_equations(op: str, p: dict[str, torch.Tensor], direction: str, acts: list[tuple[str, float, float]],
                   clip: float = 0.0, input_forget: int = 0, linear_before_reset: int = 0,
                   layout: int = 0) -> torch.Tensor:
    """pred: Y, Y_h[, Y_c] flattened, from the ONNX definitions."""
    if layout:
        p = {k: v.transpose(0, 1) if k in ("Xw", "initial_h", "initial_c") else v for k, v in p.items()}
    x, d_count = p["Xw"], (2 if direction == "bidirectional" else 1)
    lens = p.get("sequence_lens", torch.full((B,), T))
    cl = (lambda v: v.clamp(-clip, clip)) if clip else (lambda v: v)
    per = len(acts) // d_count
    ys, hs, cs = [], [], []
    for d in range(d_count):
        fn = [lambda v, k=k: TORCH_ACTS[acts[d * per + k][0]](v, *acts[d * per + k][1:]) for k in range(per)]
        w, r = p["W"][d], p["R"][d]
        wb, rb = p["B"][d].chunk(2)
        h = p["initial_h"][d] if "initial_h" in p else torch.zeros(B, H, dtype=torch.float64)
        c = p["initial_c"][d] if "initial_c" in p else torch.zeros(B, H, dtype=torch.float64)
        y = [None] * T
        for t in (range(T - 1, -1, -1) if direction == "reverse" or d == 1 else range(T)):
            m = (t < lens).double()[:, None]
            if op == "LSTM":
                gi, go, gf, gc = (x[t] @ w.T + h @ r.T + wb + rb).chunk(4, -1)
                pi, po, pf = p["P"][d].chunk(3) if "P" in p else (0, 0, 0)
                i = fn[0](cl(gi + pi * c))
                f = 1 - i if input_forget else fn[0](cl(gf + pf * c))
                cn = f * c + i * fn[1](cl(gc))
                hn = fn[0](cl(go + po * cn)) * fn[2](cn)
                c = m * cn + (1 - m) * c
            elif op == "GRU":
                xz, xr, xh = (x[t] @ w.T + wb).chunk(3, -1)
                rz, rr, rh = rb.chunk(3)
                z = fn[0](cl(xz + h @ r[:H].T + rz))
                reset = fn[0](cl(xr + h @ r[H:2 * H].T + rr))
                inner = reset * (h @ r[2 * H:].T + rh) if linear_before_reset else (reset * h) @ r[2 * H:].T + rh
                hn = (1 - z) * fn[1](cl(xh + inner)) + z * h
            else:
                hn = fn[0](cl(x[t] @ w.T + h @ r.T + wb + rb))
            h = m * hn + (1 - m) * h
            y[t] = m * hn
        ys.append(torch.stack(y))
        hs.append(h)
        cs.append(c)
    parts = [torch.stack(ys, 1), torch.stack(hs)] + ([torch.stack(cs)] if op == "LSTM" else [])
    if layout:
        parts = [parts[0].permute(2, 0, 1, 3)] + [q.transpose(0, 1) for q in parts[1:]]
    return torch.cat([q.reshape(1, -1) for q in parts], 1)


def check_against(op: str, values: dict[str, np.ndarray], direction: str, pred_fn, **attrs) -> None:
    m = model(op, values, direction, **attrs)
    params = {k: torch.tensor(v.astype(np.float64), requires_grad=v.dtype != np.int32) if v.dtype != np.int32
              else torch.tensor(v) for k, v in values.items()}
    pred = pred_fn(params)
    labels = np.random.default_rng(7).standard_normal(tuple(pred.shape))
    expected = F.mse_loss(pred, torch.tensor(labels))
    expected.backward()
    loss, grads = lite_step(m, labels)
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    wanted = {k: t.grad.numpy() for k, t in params.items() if t.requires_grad}
    assert set(grads) == set(wanted)
    for name, want in wanted.items():
        assert rel(grads[name], want) < 1e-4, name


DEFAULT_ACTS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_gradients_with_sequence_lens_and_initial_states(op, direction):
    d = 2 if direction == "bidirectional" else 1
    values = arrays(op, d, lens=[4, 1, 3], peepholes=op == "LSTM")
    acts = [(a, 0.0, 0.0) for a in DEFAULT_ACTS[op]] * d
    check_against(op, values, direction, lambda p: onnx_equations(op, p, direction, acts))


@pytest.mark.parametrize("op", GATES)
def test_gradients_batchwise(op):
    values = batch_major(arrays(op, 2, lens=[3, 4, 2], peepholes=op == "LSTM"))
    acts = [(a, 0.0, 0.0) for a in DEFAULT_ACTS[op]] * 2
    check_against(op, values, "bidirectional", lambda p: onnx_equations(op, p, "bidirectional", acts, layout=1),
                  layout=1)


@pytest.mark.parametrize("op", GATES)
def test_gradients_through_clip(op):
    values = arrays(op, 2)
    acts = [(a, 0.0, 0.0) for a in DEFAULT_ACTS[op]] * 2
    check_against(op, values, "bidirectional", lambda p: onnx_equations(op, p, "bidirectional", acts, clip=0.8),
                  clip=0.8)


def test_lstm_gradients_with_input_forget_and_peepholes():
    values = arrays("LSTM", 1, peepholes=True)
    acts = [(a, 0.0, 0.0) for a in DEFAULT_ACTS["LSTM"]]
    check_against("LSTM", values, "forward", lambda p: onnx_equations("LSTM", p, "forward", acts, input_forget=1),
                  input_forget=1)


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_gradients_both_reset_forms(lbr):
    values = arrays("GRU", 1, lens=[2, 4, 3])
    acts = [(a, 0.0, 0.0) for a in DEFAULT_ACTS["GRU"]]
    check_against("GRU", values, "forward",
                  lambda p: onnx_equations("GRU", p, "forward", acts, linear_before_reset=lbr),
                  linear_before_reset=lbr)


ACTS = [("Affine", 0.7, 0.2), ("LeakyRelu", 0.3, 0.0), ("ScaledTanh", 1.5, 0.7), ("HardSigmoid", 0.3, 0.4),
        ("Elu", 0.8, 0.0), ("Softsign", 0.0, 0.0), ("Softplus", 0.0, 0.0), ("Sigmoid", 0.0, 0.0)]


@pytest.mark.parametrize("act", ACTS, ids=[a[0] for a in ACTS])
def test_rnn_gradients_for_every_activation(act):
    values = arrays("RNN", 1, initial=False)
    name, alpha, beta = act
    attrs = dict(activations=[name], activation_alpha=[alpha], activation_beta=[beta])
    if name in ("Softsign", "Softplus", "Sigmoid"):
        attrs = dict(activations=[name])
    check_against("RNN", values, "forward", lambda p: onnx_equations("RNN", p, "forward", [act]), **attrs)


# ---- torch.nn's own layers -----------------------------------------------------------------------------------------
def _blocks(a: torch.Tensor, order: list[int]) -> torch.Tensor:
    return torch.cat([a.chunk(len(order))[k] for k in order])


TORCH = {"LSTM": (torch.nn.LSTM, [0, 3, 1, 2]), "GRU": (torch.nn.GRU, [1, 0, 2]), "RNN": (torch.nn.RNN, [0])}
# torch gate order -> ONNX: LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h (torch's GRU resets after the matmul)


@pytest.mark.parametrize("op", GATES)
@pytest.mark.parametrize("bidirectional", [False, True])
def test_gradients_match_torch_nn(op, bidirectional):
    cls, order = TORCH[op]
    torch.manual_seed(0)
    layer = cls(I, H, bidirectional=bidirectional).double()
    d = 2 if bidirectional else 1
    suffixes = ["", "_reverse"][:d]
    stack = lambda name: torch.stack([_blocks(getattr(layer, name + s), order) for s in suffixes])    # noqa: E731
    xw = torch.tensor(np.random.default_rng(3).standard_normal((T, B, I)), requires_grad=True)
    values = {"Xw": xw.detach().numpy().astype(np.float32), "W": stack("weight_ih_l0").detach().numpy(),
              "R": stack("weight_hh_l0").detach().numpy(),
              "B": torch.cat([stack("bias_ih_l0"), stack("bias_hh_l0")], 1).detach().numpy()}
    values = {k: v.astype(np.float32) for k, v in values.items()}
    y, state = layer(xw)
    states = list(state) if op == "LSTM" else [state]
    pred = torch.cat([y.reshape(T, B, d, H).transpose(1, 2).reshape(1, -1)] + [s.reshape(1, -1) for s in states], 1)
    labels = np.random.default_rng(7).standard_normal(tuple(pred.shape))
    expected = F.mse_loss(pred, torch.tensor(labels))
    expected.backward()
    attrs = {"linear_before_reset": 1} if op == "GRU" else {}
    loss, grads = lite_step(model(op, values, "bidirectional" if bidirectional else "forward", **attrs), labels)
    assert loss == pytest.approx(expected.item(), rel=1e-5)
    grad_of = lambda name: torch.stack([_blocks(getattr(layer, name + s).grad, order) for s in suffixes])  # noqa: E731
    wanted = {"Xw": xw.grad, "W": grad_of("weight_ih_l0"), "R": grad_of("weight_hh_l0"),
              "B": torch.cat([grad_of("bias_ih_l0"), grad_of("bias_hh_l0")], 1)}
    for name, want in wanted.items():
        assert rel(grads[name], want.numpy()) < 1e-4, name
