"""int8 LSTM and GRU (lite/kernels/int8/recurrent.py) against PyTorch's float cells run on the dequantized X, W and
R, with the hidden state rounded to Y's int8 grid after every step (the quantized math written independently),
within one output quantum; and a fully quantized LSTM/GRU model against the float model."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from lite.compiler import evaluate
from lite.dtypes import DataType
from lite.kernel import TensorSpec, kernel_for
from lite.model import NodeDef
from schema import attrs as op_attrs
from schema import fb
from tests.lite.kernels.int8.test_kernels import qparams

RNG = np.random.default_rng(46)
T, B, I, H = 6, 2, 5, 8
SX, ZX = 0.05, 3
QY, QH, QC = (2 / 255, 0), (2 / 255, 1), (0.03, -2)      # Y and Y_h in (-1, 1), the cell state wider
A = fb.RnnActivation


def row_quantized(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[D, G*H, in] -> int8 levels and one symmetric scale per gate row (axis 1)."""
    scale = np.abs(w).max(axis=(0, 2)) / 127
    return np.clip(np.rint(w / scale[None, :, None]), -127, 127).astype(np.int8), scale


def fake(h: torch.Tensor, q: tuple[float, int]) -> torch.Tensor:
    return (torch.clamp(torch.round(h / q[0]) + q[1], -128, 127) - q[1]) * q[0]


def levels(h: torch.Tensor, q: tuple[float, int]) -> np.ndarray:
    return torch.clamp(torch.round(h / q[0]) + q[1], -128, 127).numpy()


def case(op: str, gates: int, dirs: int = 1):
    x = RNG.integers(-128, 128, (T, B, I)).astype(np.int8)
    wq, ws = row_quantized(RNG.normal(0, 0.5, (dirs, gates * H, I)))
    rq, rs = row_quantized(RNG.normal(0, 0.4, (dirs, gates * H, H)))
    b = RNG.normal(0, 0.3, (dirs, 2 * gates * H)).astype(np.float32)
    deq = [torch.from_numpy(v) for v in ((x.astype(np.float64) - ZX) * SX, wq * ws[None, :, None],
                                         rq * rs[None, :, None], b.astype(np.float64))]
    outs = [QY, QH] + [QC] * (op == "LSTM")
    inputs = [(x, qparams([SX], [ZX])), (wq, qparams(ws, [0] * len(ws))), (rq, qparams(rs, [0] * len(rs))),
              (b, None)]
    return inputs, outs, deq


def attrs(op: str, functions: list[int], dirs: int, **extra) -> dict:
    n = len(functions) * dirs
    return dict(hidden_size=H, direction=fb.RnnDirection.BIDIRECTIONAL if dirs == 2 else fb.RnnDirection.FORWARD,
                activations=functions * dirs, activation_alpha=[0.0] * n, activation_beta=[0.0] * n, **extra)


def run_all(op: str, inputs, outs, backend: str = "numpy", **kw) -> list[np.ndarray]:
    """Every output of one node of the int8 kernel (numpy or its compiled sibling) on constant inputs."""
    node = NodeDef("node", op, op_attrs.build(op, kw), list(range(len(inputs))),
                   list(range(len(inputs), len(inputs) + len(outs))))
    specs = [TensorSpec(a.shape, a.dtype, a, p) for a, p in inputs]
    if backend == "compiled":
        from lite.kernels.compiled.int8_recurrent import GRUInt8Compiled, LSTMInt8Compiled
        kernel = {"LSTM": LSTMInt8Compiled, "GRU": GRUInt8Compiled}[op](node)
    else:
        kernel = kernel_for(op, DataType.INT8, quantized=True)(node)
    kernel.out_quant = [qparams([s], [z]) for s, z in outs]
    out_specs = kernel.infer(specs)
    kernel.select(specs)
    return [r.value for r in evaluate(kernel, node, specs, out_specs)]


HAVE_NUMBA = importlib.util.find_spec("numba") is not None
BACKENDS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dirs", [1, 2])
def test_lstm_within_one_quantum_of_the_quantized_math_in_float(dirs, backend):
    inputs, outs, (x, w, r, b) = case("LSTM", 4, dirs)
    got = run_all("LSTM", inputs, outs, backend, **attrs("LSTM", [A.SIGMOID, A.TANH, A.TANH], dirs))
    for d in range(dirs):
        h, c = torch.zeros(B, H, dtype=torch.float64), torch.zeros(B, H, dtype=torch.float64)
        wb, rb = b[d, :4 * H], b[d, 4 * H:]
        for t in (range(T - 1, -1, -1) if d == 1 else range(T)):
            g = x[t] @ w[d].T + wb + h @ r[d].T + rb
            i, o, f, cand = (g[:, k * H:(k + 1) * H] for k in range(4))          # ONNX's order: i, o, f, c
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(cand)
            h = fake(torch.sigmoid(o) * torch.tanh(c), QY)
            assert np.abs(got[0][t, d] - levels(h, QY)).max() <= 1
        assert np.abs(got[1][d] - levels(h, QH)).max() <= 1 and np.abs(got[2][d] - levels(c, QC)).max() <= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_gru_within_one_quantum_of_the_quantized_math_in_float(backend):
    inputs, outs, (x, w, r, b) = case("GRU", 3)
    got = run_all("GRU", inputs, outs, backend, **attrs("GRU", [A.SIGMOID, A.TANH], 1, linear_before_reset=True))
    h = torch.zeros(B, H, dtype=torch.float64)
    wb, rb = b[0, :3 * H], b[0, 3 * H:]
    for t in range(T):
        gx, gh = x[t] @ w[0].T + wb, h @ r[0].T + rb
        z = torch.sigmoid(gx[:, :H] + gh[:, :H])                                  # ONNX's order: z, r, h
        reset = torch.sigmoid(gx[:, H:2 * H] + gh[:, H:2 * H])
        cand = torch.tanh(gx[:, 2 * H:] + reset * gh[:, 2 * H:])
        h = fake((1 - z) * cand + z * h, QY)
        assert np.abs(got[0][t, 0] - levels(h, QY)).max() <= 1
    assert np.abs(got[1][0] - levels(h, QH)).max() <= 1


def test_weights_without_row_scales_are_refused():
    from lite.status import NotSupportedError
    inputs, outs, _ = case("GRU", 3)
    inputs[2] = (inputs[2][0], qparams([0.01], [0]))
    with pytest.raises(NotSupportedError, match="R with one scale per gate row"):
        run_all("GRU", inputs, outs, **attrs("GRU", [A.SIGMOID, A.TANH], 1, linear_before_reset=True))


@pytest.mark.parametrize("cell", ["LSTM", "GRU"])
def test_fully_quantized_recurrent_model_stays_int8_and_near_float(cell):
    from converter import to_graph
    from converter.export import to_bytes
    from converter.quant import QuantConfig, quantize
    from models.sequence import kws_gru, kws_lstm
    import lite
    model = (kws_lstm if cell == "LSTM" else kws_gru)(frames=12, hidden=32)
    name = model.graph.input[0].name
    samples = [{name: RNG.normal(0, 1, (1, 12, 40)).astype(np.float32)} for _ in range(6)]
    graph = quantize(to_graph(model), QuantConfig(preset="MINDSPORE_LITE"), samples)
    assert [str(graph.values[n.outputs[0]].dtype) for n in graph.nodes if n.op == cell] == ["int8", "int8"]

    def outputs(buf: bytes) -> np.ndarray:
        s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=1))
        got = []
        for sample in samples:
            s.GetInputsByTensorName(name).set_data(sample[name])
            s.RunGraph()
            got.append(next(iter(s.GetOutputs().values())).numpy().copy())
        return np.concatenate(got)

    ref, quant = outputs(to_bytes(to_graph(model))), outputs(to_bytes(graph))
    assert np.abs(quant - ref).max() / (ref.max() - ref.min()) < 0.05
