"""int8 Softmax, LayerNorm and GELU (the ops between a transformer's GEMMs) against PyTorch's float op on the
dequantized input, quantized to the output's params (within one quantum), and Softmax against LiteRT's int8
SOFTMAX kernel."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from schema import fb
from tests.lite.kernels.int8.test_kernels import qparams, run_node

RNG = np.random.default_rng(46)


def quantized(real: torch.Tensor, scale: float, zero_point: int) -> np.ndarray:
    return np.clip(np.rint(real.double().numpy() / scale) + zero_point, -128, 127)


def levels(*shape: int, low: int = -128, high: int = 128) -> np.ndarray:
    return RNG.integers(low, high, shape).astype(np.int8)


@pytest.mark.parametrize("scale, axis", [(0.05, -1), (0.3, 1), (0.01, 0)])
def test_softmax_within_one_quantum_of_float(scale, axis):
    x, zp, out = levels(3, 7, 10), -5, (1 / 256, -128)
    got = run_node("Softmax", [(x, qparams([scale], [zp]))], qparams(*zip(out)), axis=axis)
    real = torch.softmax(torch.from_numpy((x.astype(np.float64) - zp) * scale), dim=axis)
    want = quantized(real, *out)
    assert got.dtype == np.int8 and np.abs(got - want).max() <= 1


def test_softmax_other_output_params_and_a_constant_row():
    x = np.concatenate([levels(2, 16), np.full((1, 16), 9, np.int8)])
    out = (0.004, -100)
    got = run_node("Softmax", [(x, qparams([0.1], [2]))], qparams(*zip(out)), axis=-1)
    want = quantized(torch.softmax(torch.from_numpy((x.astype(np.float64) - 2) * 0.1), dim=-1), *out)
    assert np.abs(got - want).max() <= 1 and (got[2] == got[2, 0]).all()


def test_softmax_within_one_quantum_of_litert():
    from tests.tflite_models import Feed, litert_interpreter, run_litert, single
    pytest.importorskip("tflite", reason="the test builds its .tflite file with the 'tflite' package")
    litert_interpreter()
    x, scale, zp = levels(4, 33), 0.08, 3
    data, feeds = single("SOFTMAX", [Feed(x, scale, zp)], 1, "SoftmaxOptions", out_dtypes=(np.int8,),
                         out_quant=((1 / 256, -128),), Beta=1.0)
    expected = run_litert(data, feeds)[0]
    got = run_node("Softmax", [(x, qparams([scale], [zp]))], qparams([1 / 256], [-128]), axis=-1)
    assert np.abs(got.astype(np.int32) - expected).max() <= 1


@pytest.mark.parametrize("scale, epsilon", [(0.05, 1e-5), (0.002, 1e-5), (0.05, 1e-1)])
def test_layer_norm_within_one_quantum_of_float(scale, epsilon):
    x, zp = levels(2, 5, 48), 7
    x[0, 0] = 30                                    # a constant row: variance 0, the output is the bias
    gamma = RNG.normal(1, 0.3, 48).astype(np.float32)
    beta = RNG.normal(0, 0.5, 48).astype(np.float32)
    out = (0.03, -4)
    got = run_node("LayerNorm", [(x, qparams([scale], [zp])), (gamma, None), (beta, None)], qparams(*zip(out)),
                   axis=-1, epsilon=epsilon)
    real = torch.nn.functional.layer_norm(torch.from_numpy((x.astype(np.float64) - zp) * scale), (48,),
                                          torch.from_numpy(gamma).double(), torch.from_numpy(beta).double(),
                                          epsilon)
    assert got.dtype == np.int8 and np.abs(got - quantized(real, *out)).max() <= 1


def test_layer_norm_over_two_axes():
    x, gamma = levels(3, 4, 6), RNG.normal(1, 0.3, (4, 6)).astype(np.float32)
    got = run_node("LayerNorm", [(x, qparams([0.1], [0])), (gamma, None)], qparams([0.05], [0]), axis=1,
                   epsilon=1e-5)
    real = torch.nn.functional.layer_norm(torch.from_numpy(x.astype(np.float64) * 0.1), (4, 6),
                                          torch.from_numpy(gamma).double(), None, 1e-5)
    assert np.abs(got - quantized(real, 0.05, 0)).max() <= 1


@pytest.mark.parametrize("kind", [fb.ActivationType.GELU, fb.ActivationType.GELU_TANH])
def test_gelu_is_the_int8_lookup_table(kind):
    x = np.arange(-128, 128, dtype=np.int8)
    got = run_node("Activation", [(x, qparams([0.04], [-20]))], qparams([0.03], [-120]), type=kind)
    approximate = "tanh" if kind == fb.ActivationType.GELU_TANH else "none"
    real = torch.nn.functional.gelu(torch.from_numpy((x.astype(np.float64) + 20) * 0.04), approximate=approximate)
    assert np.abs(got - quantized(real, 0.03, -120)).max() <= 1
