"""int8 kernels against a pure-Python integer reference written from docs/quantization.md (bit for bit), and
QuantDTypeCast / int8 conv against float math."""
from __future__ import annotations

import math
import struct
from fractions import Fraction
from typing import Any, Sequence

import numpy as np
import pytest

from lite.compiler import fold_or_infer
from lite.kernel import TensorSpec
from lite.model import NodeDef
from lite.kernels.int8.requantize import ONNXRUNTIME
from schema import attrs as op_attrs
from schema import fb

A = fb.ActivationType


# ---- the reference: TFLite's integer arithmetic with Python ints ------------------------------------------------
def ref_quantize_multiplier(real: float) -> tuple[int, int]:
    if real == 0:
        return 0, 0
    fraction, shift = math.frexp(real)
    m0 = int(math.floor(fraction * (1 << 31) + 0.5))
    if m0 == 1 << 31:
        m0, shift = m0 // 2, shift + 1
    return (0, 0) if shift < -31 else (m0, shift)


def ref_mbqm(x: int, real: float) -> int:
    """MultiplyByQuantizedMultiplier(x, QuantizeMultiplier(real)) in TFLite's single-rounding form: the exact
    product x * M0 * 2^(shift - 31), rounded half up."""
    m0, shift = ref_quantize_multiplier(real)
    return math.floor(Fraction(x * m0) * Fraction(2) ** (shift - 31) + Fraction(1, 2))


def ref_requantize(acc: int, real: float, zp: int, lo: int, hi: int) -> int:
    return min(max(ref_mbqm(acc, real) + zp, lo), hi)


def ref_clamp(activation: int, scale: float, zp: int, lo: int, hi: int) -> tuple[int, int]:
    """Fused activation bounds: RELU lo = quantize(0), RELU6 hi = quantize(6) (round half to even)."""
    def quantize(v: float) -> int:
        return min(max(round(v / scale) + zp, lo), hi)
    if activation == A.RELU:
        return quantize(0.0), hi
    if activation == A.RELU6:
        return quantize(0.0), quantize(6.0)
    return lo, hi


def ref_conv(x: np.ndarray, w: np.ndarray, bias: Sequence[int], zp_x: int, stride: int, pad: int,
             group: int) -> list[list[list[list[int]]]]:
    """acc[n][oh][ow][o] = sum (x - zp_x) * w + bias over the window (padding is real 0), Python ints."""
    n_, h, wd, c = x.shape
    o_, kh, kw, cg = w.shape
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    xs, ws = x.tolist(), w.tolist()
    per_group = o_ // group
    out = []
    for n in range(n_):
        rows = []
        for i in range(oh):
            cols = []
            for j in range(ow):
                accs = []
                for o in range(o_):
                    acc = int(bias[o])
                    g = o // per_group
                    for a in range(kh):
                        for b in range(kw):
                            y, z = i * stride - pad + a, j * stride - pad + b
                            if 0 <= y < h and 0 <= z < wd:
                                for k in range(cg):
                                    acc += (xs[n][y][z][g * cg + k] - zp_x) * ws[o][a][b][k]
                    accs.append(acc)
                cols.append(accs)
            rows.append(cols)
        out.append(rows)
    return out


# ---- running one kernel -----------------------------------------------------------------------------------------
def qparams(scales: Sequence[float], zero_points: Sequence[int], bits: int = 8) -> list[Any]:
    params = []
    for s, z in zip(scales, zero_points):
        q = fb.QuantParamT()
        q.scale, q.zeroPoint, q.numBits, q.inited = float(s), int(z), bits, True
        params.append(q)
    return params


def run_node(op: str, inputs: Sequence[tuple[np.ndarray, list[Any] | None]], out_params: list[Any],
             rounding: str = "tflite", **attrs: Any) -> np.ndarray:
    """Run one node on constant inputs (compile-time evaluation: infer, bind, run) and return its output."""
    node = NodeDef("node", op, op_attrs.build(op, attrs), list(range(len(inputs))), [len(inputs)],
                   rounding=rounding)
    specs = [TensorSpec(a.shape, a.dtype, a, p) for a, p in inputs]
    outs, kernel = fold_or_infer(node, specs, [out_params])
    assert kernel is None
    return outs[0].value


def act_params(rng: np.random.Generator, bits: int) -> tuple[float, int, int, int]:
    """(scale, zero point, lo, hi) of a random `bits`-bit activation tensor."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return float(rng.uniform(0.01, 0.2)), int(rng.integers(lo, hi + 1)), lo, hi


def weight_values(rng: np.random.Generator, shape: tuple[int, ...], bits: int) -> np.ndarray:
    top = (1 << (bits - 1)) - 1
    return rng.integers(-top, top + 1, shape).astype(np.int8)


# ---- requantize -------------------------------------------------------------------------------------------------
def test_multiply_by_quantized_multiplier_matches_reference():
    from lite.kernels.int8.requantize import multiply_by_quantized_multiplier, quantize_multipliers
    rng = np.random.default_rng(0)
    reals = np.concatenate([rng.uniform(1e-6, 0.99, 40), rng.uniform(1.0, 30.0, 8), [0.5, 0.25, 1.0]])
    x = np.concatenate([rng.integers(-(1 << 24), 1 << 24, 300), [0, 1, -1, (1 << 30) - 1, -(1 << 30)],
                        rng.integers(-300, 300, 100)])
    m0, n = quantize_multipliers(reals)
    for real, m, s in zip(reals, m0, n):
        assert (int(m), int(s)) == ref_quantize_multiplier(real)
        small = x if real < 1 else x // (1 << 6)
        got = multiply_by_quantized_multiplier(small, m, s)
        assert got.tolist() == [ref_mbqm(int(v), real) for v in small], real


def test_rounding_halves_go_up():
    """Exact halves of x * real round toward +inf in both signs (one rounding, no second one by the shift)."""
    from lite.kernels.int8.requantize import multiply_by_quantized_multiplier, quantize_multiplier
    x = np.array([-7, -5, -3, -1, 1, 3, 5, 7], np.int64)
    m0, n = quantize_multiplier(0.5)
    assert multiply_by_quantized_multiplier(x, m0, n).tolist() == [-3, -2, -1, 0, 1, 2, 3, 4]
    m0, n = quantize_multiplier(0.25)
    x = np.arange(-6, 7)
    assert multiply_by_quantized_multiplier(x, m0, n).tolist() == [-1, -1, -1, -1, 0, 0, 0, 0, 1, 1, 1, 1, 2]


# ---- QuantDTypeCast ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16])
def test_quant_cast_round_trip_within_half_step(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    scale, zp = 0.05, int((int(info.min) + int(info.max)) // 2 + 3)
    bits = 16 if dtype == np.int16 else 8
    params = qparams([scale], [zp], bits)
    span = min(info.max - zp, zp - info.min) * scale
    x = rng.uniform(-span, span, (3, 7)).astype(np.float32)
    q = run_node("QuantDTypeCast", [(x, None)], params, src_t=43, dst_t={np.int8: 32, np.uint8: 37,
                                                                        np.int16: 33}[dtype])
    assert q.dtype == dtype
    expected = np.clip(np.rint(x / np.float32(scale)) + zp, info.min, info.max)
    np.testing.assert_array_equal(q, expected)
    back = run_node("QuantDTypeCast", [(q, params)], [], src_t=0, dst_t=43)
    assert back.dtype == np.float32
    assert np.abs(back - x).max() <= scale / 2 + 1e-6


def test_quant_cast_saturates():
    params = qparams([0.1], [10])
    q = run_node("QuantDTypeCast", [(np.array([-1e3, 1e3, 0.0], np.float32), None)], params, dst_t=32)
    assert q.tolist() == [-128, 127, 10]


def test_quant_cast_per_channel_dequantize():
    q = np.array([[1, 2], [3, 4], [5, 6]], np.int8)
    x = run_node("QuantDTypeCast", [(q, qparams([0.5, 2.0, 1.0], [0, 1, 2]))], [], dst_t=43)
    np.testing.assert_array_equal(x, [[0.5, 1.0], [4.0, 6.0], [3.0, 4.0]])


# ---- Conv2D -----------------------------------------------------------------------------------------------------
CONV_CASES = [
    # (N, H, W, C, O, K, stride, pad, group, bits, per_channel, activation)
    (1, 5, 6, 4, 6, 3, 1, 1, 1, 8, True, A.NO_ACTIVATION),
    (2, 7, 5, 3, 4, 3, 2, 0, 1, 8, False, A.RELU),
    (1, 6, 6, 6, 6, 3, 1, 1, 6, 8, True, A.RELU6),      # depthwise
    (1, 7, 7, 4, 4, 3, 2, 1, 4, 6, True, A.NO_ACTIVATION),   # depthwise, strided
    (1, 5, 5, 4, 6, 2, 1, 1, 2, 5, True, A.RELU),        # grouped
    (1, 4, 4, 5, 3, 1, 1, 0, 1, 3, True, A.NO_ACTIVATION),   # 1x1
    (1, 3, 3, 130, 2, 3, 1, 1, 1, 8, True, A.NO_ACTIVATION),  # K = 1170: split in chunks
    (1, 4, 3, 3, 2, 3, 1, 1, 1, 2, True, A.NO_ACTIVATION),   # 2 bits
]


def conv_case(case: tuple, seed: int) -> tuple[dict, tuple, np.ndarray]:
    n, h, w, c, o, k, stride, pad, group, bits, per_channel, activation = case
    rng = np.random.default_rng(seed)
    s_x, zp_x, lo, hi = act_params(rng, bits)
    s_y, zp_y, _, _ = act_params(rng, bits)
    s_y *= 4
    x = rng.integers(lo, hi + 1, (n, h, w, c)).astype(np.int8)
    wt = weight_values(rng, (o, k, k, c // group), bits)
    s_w = rng.uniform(0.005, 0.05, o if per_channel else 1)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    inputs = [(x, qparams([s_x], [zp_x], bits)), (wt, qparams(s_w, [0] * len(s_w), bits)),
              (bias, qparams(s_x * s_w, [0] * len(s_w)))]
    attrs = dict(kernel_h=k, kernel_w=k, stride_h=stride, stride_w=stride, pad_top=pad, pad_bottom=pad,
                 pad_left=pad, pad_right=pad, group=group, activation=activation)
    params = (s_x, zp_x, s_w, s_y, zp_y, lo, hi)
    return dict(inputs=inputs, attrs=attrs, out=qparams([s_y], [zp_y], bits)), params, wt


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv2d_matches_integer_reference(case):
    spec, (s_x, zp_x, s_w, s_y, zp_y, lo, hi), wt = conv_case(case, seed=len(CONV_CASES) + case[3])
    x, bias = spec["inputs"][0][0], spec["inputs"][2][0]
    got = run_node("Conv2D", spec["inputs"], spec["out"], **spec["attrs"])
    stride, pad, group, activation = case[6], case[7], case[8], case[11]
    acc = ref_conv(x, wt, bias.tolist(), zp_x, stride, pad, group)
    lo, hi = ref_clamp(activation, s_y, zp_y, lo, hi)
    s_w = np.broadcast_to(s_w, (wt.shape[0],))
    want = [[[[ref_requantize(v, s_x * float(s_w[o]) / s_y, zp_y, lo, hi) for o, v in enumerate(px)]
              for px in row] for row in img] for img in acc]
    assert got.tolist() == want


def test_int8_conv_within_one_step_of_float_conv():
    import torch
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 8, 8, 5)).astype(np.float32)
    w = (rng.standard_normal((7, 3, 3, 5)) * 0.3).astype(np.float32)
    s_x, zp_x = float(np.ptp(x) / 255), -128 - int(round(x.min() / (np.ptp(x) / 255)))
    s_w = np.abs(w).reshape(7, -1).max(axis=1) / 127
    qx = np.clip(np.rint(x / s_x) + zp_x, -128, 127).astype(np.int8)
    qw = np.rint(w / s_w[:, None, None, None]).astype(np.int8)
    real_x = (qx.astype(np.float64) - zp_x) * s_x
    real_w = qw * s_w[:, None, None, None].astype(np.float64)
    y = torch.nn.functional.conv2d(torch.from_numpy(real_x.transpose(0, 3, 1, 2)),
                                   torch.from_numpy(real_w.transpose(0, 3, 1, 2)), padding=1)
    y = y.numpy().transpose(0, 2, 3, 1)
    s_y = float(np.ptp(y) / 255)
    zp_y = -128 - int(round(y.min() / s_y))
    got = run_node("Conv2D", [(qx, qparams([s_x], [zp_x])), (qw, qparams(s_w, [0] * 7))], qparams([s_y], [zp_y]),
                   kernel_h=3, kernel_w=3, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1)
    want = np.clip(np.rint(y / s_y) + zp_y, -128, 127)
    assert np.abs(got.astype(np.int64) - want).max() <= 1


# ---- FullConnection / MatMul ------------------------------------------------------------------------------------
@pytest.mark.parametrize("rows,depth,out,bits,activation", [(3, 10, 4, 8, A.NO_ACTIVATION), (2, 2000, 3, 8, A.RELU),
                                                             (4, 17, 5, 4, A.RELU6)])
def test_full_connection_matches_integer_reference(rows, depth, out, bits, activation):
    rng = np.random.default_rng(depth)
    s_x, zp_x, lo, hi = act_params(rng, bits)
    s_y, zp_y, _, _ = act_params(rng, bits)
    s_y *= 8
    x = rng.integers(lo, hi + 1, (rows, depth)).astype(np.int8)
    w = weight_values(rng, (out, depth), bits)
    s_w = rng.uniform(0.001, 0.02, out)
    bias = rng.integers(-5000, 5000, out).astype(np.int32)
    got = run_node("FullConnection", [(x, qparams([s_x], [zp_x], bits)), (w, qparams(s_w, [0] * out, bits)),
                                      (bias, qparams(s_x * s_w, [0] * out))], qparams([s_y], [zp_y], bits),
                   activation=activation)
    lo, hi = ref_clamp(activation, s_y, zp_y, lo, hi)
    want = [[ref_requantize(int(bias[o]) + sum((int(a) - zp_x) * int(b) for a, b in zip(x[r], w[o])),
                            s_x * s_w[o] / s_y, zp_y, lo, hi) for o in range(out)] for r in range(rows)]
    assert got.tolist() == want


@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_matches_integer_reference(transpose_b):
    rng = np.random.default_rng(11)
    s_a, zp_a, lo, hi = act_params(rng, 8)
    s_b, zp_b, _, _ = act_params(rng, 8)
    s_y, zp_y, _, _ = act_params(rng, 8)
    s_y *= 30
    a = rng.integers(lo, hi + 1, (2, 3, 300)).astype(np.int8)
    b = rng.integers(lo, hi + 1, (300, 4)).astype(np.int8)
    stored = np.ascontiguousarray(b.T) if transpose_b else b
    got = run_node("MatMul", [(a, qparams([s_a], [zp_a])), (stored, qparams([s_b], [zp_b]))],
                   qparams([s_y], [zp_y]), transpose_b=transpose_b)
    want = [[[ref_requantize(sum((int(p) - zp_a) * (int(q) - zp_b) for p, q in zip(a[i, r], b[:, c])),
                             s_a * s_b / s_y, zp_y, lo, hi) for c in range(4)] for r in range(3)] for i in range(2)]
    assert got.tolist() == want


# ---- Add / Mul --------------------------------------------------------------------------------------------------
def ref_add(a: int, b: int, qa: tuple, qb: tuple, qy: tuple, lo: int, hi: int) -> int:
    """TFLite's int8 Add: inputs shifted left 20 bits, rescaled to 2 * max scale, summed, rescaled."""
    twice_max = 2 * max(qa[0], qb[0])
    sa = ref_mbqm((a - qa[1]) * (1 << 20), qa[0] / twice_max)
    sb = ref_mbqm((b - qb[1]) * (1 << 20), qb[0] / twice_max)
    return ref_requantize(sa + sb, twice_max / ((1 << 20) * qy[0]), qy[1], lo, hi)


def ref_mul(a: int, b: int, qa: tuple, qb: tuple, qy: tuple, lo: int, hi: int) -> int:
    return ref_requantize((a - qa[1]) * (b - qb[1]), qa[0] * qb[0] / qy[0], qy[1], lo, hi)


@pytest.mark.parametrize("op,ref", [("Add", ref_add), ("Mul", ref_mul)])
@pytest.mark.parametrize("activation", [A.NO_ACTIVATION, A.RELU])
def test_binary_matches_integer_reference_with_broadcasting(op, ref, activation):
    rng = np.random.default_rng(21)
    qa, qb, qy = (act_params(rng, 8)[:2] for _ in range(3))
    a = rng.integers(-128, 128, (2, 3, 4)).astype(np.int8)
    b = rng.integers(-128, 128, (3, 1)).astype(np.int8)
    got = run_node(op, [(a, qparams([qa[0]], [qa[1]])), (b, qparams([qb[0]], [qb[1]]))],
                   qparams([qy[0]], [qy[1]]), activation=activation)
    lo, hi = ref_clamp(activation, qy[0], qy[1], -128, 127)
    bb = np.broadcast_to(b, a.shape)
    want = [ref(int(p), int(q), qa, qb, qy, lo, hi) for p, q in zip(a.ravel(), bb.ravel())]
    assert got.ravel().tolist() == want


# ---- pooling ----------------------------------------------------------------------------------------------------
def ref_pool(x: np.ndarray, k: int, stride: int, pad: int, average: bool, include_pad: bool, zp: int
             ) -> list[int]:
    """Max, or TFLite's average: integer sum / count rounded half away from zero (padding = real 0)."""
    n_, h, w, c = x.shape
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    out = []
    for n in range(n_):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    taps = []
                    for a in range(k):
                        for b in range(k):
                            y, z = i * stride - pad + a, j * stride - pad + b
                            if 0 <= y < h and 0 <= z < w:
                                taps.append(int(x[n, y, z, ch]))
                            elif include_pad:
                                taps.append(zp)
                    if not average:
                        out.append(max(taps))
                    else:
                        total, count = sum(taps), len(taps)
                        mean = (abs(total) + count // 2) // count
                        out.append(mean if total >= 0 else -mean)
    return out


def f32(v: float) -> float:
    """v rounded to the nearest float32 (ties to even), as a Python float."""
    return struct.unpack("f", struct.pack("f", v))[0]


def ref_onnxruntime(acc: int, s_x: float, s_w: float, s_y: float, zp: int, lo: int, hi: int) -> int:
    """MLAS's requantization in exactly rounded steps: the multiplier f32(f32(s_x * s_w) / s_y), the product
    f32(f32(acc) * multiplier) (float32 products and quotients are exact or correctly rounded through a
    double), rounded half to even (Python's round), plus zp, clamped."""
    multiplier = f32(f32(f32(s_x) * f32(s_w)) / f32(s_y))
    return min(max(round(Fraction(f32(f32(float(acc)) * multiplier))) + zp, lo), hi)


# (N, H, W, C, O, K, stride, pad, group): dense 1x1 and 3x3 (the compiled GEMM), depthwise (the direct kernel),
# grouped (the float32 GEMM and a requantization pass)
ONNXRUNTIME_CONVS = [(1, 6, 7, 8, 20, 1, 1, 0, 1), (2, 6, 5, 6, 18, 3, 1, 1, 1), (1, 9, 8, 16, 16, 3, 2, 1, 16),
                     (1, 5, 6, 8, 8, 3, 1, 1, 2), (2, 9, 10, 3, 24, 3, 2, 1, 1), (1, 7, 6, 40, 40, 3, 1, 1, 40)]


@pytest.mark.parametrize("case", ONNXRUNTIME_CONVS)
def test_conv2d_rounds_as_onnxruntime(case):
    """`ONNXRUNTIME` against MLAS's steps computed exactly, with scales whose multipliers are powers of two
    (ties on every 2^k-th sum, half to even) or round in float32; TFLite's rounding differs on some outputs."""
    n, h, w, c, o, k, stride, pad, group = case
    rng = np.random.default_rng(sum(case))
    s_x, zp_x, s_y, zp_y = 0.0625, 3, 0.25, -5
    s_w = np.where(np.arange(o) % 2, rng.uniform(0.001, 0.02, o), 2.0 ** -rng.integers(3, 8, o))
    x = rng.integers(-128, 128, (n, h, w, c)).astype(np.int8)
    wt = rng.integers(-127, 128, (o, k, k, c // group)).astype(np.int8)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    sum0 = ref_conv(x, wt, [0] * o, zp_x, stride, pad, group)[0][0][0][0]
    bias[0] = 5 * int(s_y / (s_x * s_w[0])) // 2 - sum0       # the first output of channel 0 is 2.5: a tie
    inputs = [(x, qparams([s_x], [zp_x])), (wt, qparams(s_w, [0] * o)), (bias, qparams(s_x * s_w, [0] * o))]
    attrs = dict(kernel_h=k, kernel_w=k, stride_h=stride, stride_w=stride, pad_top=pad, pad_bottom=pad,
                 pad_left=pad, pad_right=pad, group=group)
    got = run_node("Conv2D", inputs, qparams([s_y], [zp_y]), ONNXRUNTIME, **attrs)
    acc = np.array(ref_conv(x, wt, bias.tolist(), zp_x, stride, pad, group), object)
    want = np.vectorize(lambda v, ch: ref_onnxruntime(int(v), s_x, float(s_w[ch]), s_y, zp_y, -128, 127))(
        acc, np.arange(o))
    np.testing.assert_array_equal(got, want.astype(np.int8))
    assert got[0, 0, 0, 0] == 2 + zp_y and run_node("Conv2D", inputs, qparams([s_y], [zp_y]), **attrs)[
        0, 0, 0, 0] == 3 + zp_y                                 # half to even; TFLite's half up


def run_kernel(cls: type, op: str, inputs: Sequence[tuple[np.ndarray, list[Any] | None]], out_params: list[Any],
               **attrs: Any) -> np.ndarray:
    """Like run_node, with an explicit kernel class."""
    from lite.compiler import evaluate
    node = NodeDef("node", op, op_attrs.build(op, attrs), list(range(len(inputs))), [len(inputs)])
    specs = [TensorSpec(a.shape, a.dtype, a, p) for a, p in inputs]
    kernel = cls(node)
    kernel.out_quant = [out_params]
    return evaluate(kernel, node, specs, kernel.infer(specs))[0].value


@pytest.mark.parametrize("average,include_pad,pad,stride", [(False, False, 1, 2), (True, False, 1, 1),
                                                            (True, True, 1, 2), (True, False, 0, 2)])
def test_pooling_matches_integer_reference(average, include_pad, pad, stride):
    from lite.kernels.int8.pooling import PoolingInt8Kernel
    rng = np.random.default_rng(31)
    x = rng.integers(-128, 128, (2, 6, 5, 3)).astype(np.int8)
    params = qparams([0.1], [-7])
    got = run_kernel(PoolingInt8Kernel, "Pooling", [(x, params)], params, mode=int(average), kernel_h=3,
                     kernel_w=3, stride_h=stride, stride_w=stride, pad_top=pad, pad_bottom=pad, pad_left=pad,
                     pad_right=pad, count_include_pad=include_pad)
    assert got.ravel().tolist() == ref_pool(x, 3, stride, pad, average, include_pad, -7)


def test_global_average_pool_rounds_half_away_from_zero():
    from lite.kernels.int8.pooling import PoolingInt8Kernel
    x = np.array([1, 2, -1, -2, 3, 4, -3, -4], np.int8).reshape(1, 2, 2, 2)   # sums 3/4 -> 1, -3/4 -> -1
    x = np.array([[[[1, -1], [0, 0]], [[0, 0], [1, -1]]]], np.int8)          # means 0.5 and -0.5
    params = qparams([0.1], [0])
    got = run_kernel(PoolingInt8Kernel, "Pooling", [(x, params)], params, mode=1, global_pool=True)
    assert got.ravel().tolist() == [1, -1]


def test_max_pool_requantizes_to_new_params():
    from lite.kernels.int8.pooling import PoolingInt8Kernel
    x = np.arange(-8, 8, dtype=np.int8).reshape(1, 4, 4, 1)
    got = run_kernel(PoolingInt8Kernel, "Pooling", [(x, qparams([0.1], [3]))], qparams([0.3], [-2]), mode=0,
                     kernel_h=2, kernel_w=2, stride_h=2, stride_w=2)
    maxima = [-3, -1, 5, 7]
    assert got.ravel().tolist() == [ref_requantize(m - 3, 0.1 / 0.3, -2, -128, 127) for m in maxima]


# ---- activations ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,size", [(A.SIGMOID, 256), (A.TANH, 256), (A.HSWISH, 256), (A.SWISH, 255),
                                       (A.ELU, 255)])
def test_lookup_table_activation_matches_float_function(kind, size):
    """Every int8 value (an odd count too: the last one is looked up alone, the others in pairs)."""
    import torch
    fns = {A.SIGMOID: torch.sigmoid, A.TANH: torch.tanh, A.HSWISH: torch.nn.functional.hardswish,
           A.SWISH: torch.nn.functional.silu, A.ELU: torch.nn.functional.elu}
    x = np.arange(-128, 128, dtype=np.int8)[:size]
    qx, qy = (0.05, 3), (1 / 128, -100 if kind == A.SIGMOID else 0)
    got = run_node("Activation", [(x, qparams([qx[0]], [qx[1]]))], qparams([qy[0]], [qy[1]]), type=kind,
                   alpha=1.0)
    real = fns[kind](torch.from_numpy((x.astype(np.float64) - qx[1]) * qx[0])).numpy()
    want = np.clip(np.rint(real / qy[0]) + qy[1], -128, 127)
    assert np.abs(got - want).max() <= 1


def test_lookup_table_activation_is_the_table_byte_by_byte():
    """Two bytes per lookup (a 65536-entry table of pairs) gives exactly the 256-entry table's values."""
    from lite.kernels.activation import activation_fn
    from lite.kernels.int8.activation import lookup_table
    from lite.kernels.int8.common import Quant
    x = np.random.default_rng(9).integers(-128, 128, (3, 7, 5)).astype(np.int8)
    got = run_node("Activation", [(x, qparams([0.07], [-3]))], qparams([0.02], [11]), type=A.SWISH)
    table = lookup_table(activation_fn(A.SWISH), Quant(0.07, -3, -128, 127), Quant(0.02, 11, -128, 127))
    assert got.tolist() == table[x.view(np.uint8)].tolist()


@pytest.mark.parametrize("kind,lo,hi", [(A.RELU, 5, 127), (A.RELU6, 5, 65)])
def test_clamp_activation_with_shared_params(kind, lo, hi):
    x = np.arange(-128, 128, dtype=np.int8)
    params = qparams([0.1], [5])
    got = run_node("Activation", [(x, params)], params, type=kind)
    assert got.tolist() == np.clip(np.arange(-128, 128), lo, hi).tolist()


# ---- shape ops --------------------------------------------------------------------------------------------------
def test_concat_requantizes_inputs_with_other_params():
    a = np.array([[1, 2]], np.int8)
    b = np.array([[10, -20]], np.int8)
    out = qparams([0.2], [1])
    got = run_node("Concat", [(a, out), (b, qparams([0.1], [-4]))], out, axis=1)
    assert got.tolist() == [[1, 2] + [ref_requantize(int(v) + 4, 0.5, 1, -128, 127) for v in b[0]]]


def test_pad_fills_with_zero_point():
    x = np.array([[1, 2]], np.int8)
    got = run_node("Pad", [(x, qparams([0.1], [-9])), (np.array([0, 1, 0, 1], np.int64), None)],
                   qparams([0.1], [-9]))
    assert got.tolist() == [[-9, 1, 2, -9]]


def test_transpose_requantizes_when_params_differ():
    x = np.array([[0, 10], [20, 30]], np.int8)
    got = run_node("Transpose", [(x, qparams([0.1], [0]))], qparams([0.2], [0]), perm=[1, 0])
    assert got.tolist() == [[0, 10], [5, 15]]


# ---- ONNX QDQ model -------------------------------------------------------------------------------------------
def test_onnxruntime_qdq_model_computes_onnxruntimes_integers(tmp_path):
    """A QDQ Conv / Gemm becomes an int8 layer that requantizes as onnxruntime's QLinearConv / QGemm (float32
    multiplier and product, half to even), not with TFLite's rounding, which its float32 product rounds
    differently near ties: the logits are equal."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    from converter import convert
    from lite.model import Model
    from tests.util import run_lite, run_ort, session_for, small_cnn

    rng = np.random.default_rng(7)
    samples = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(16)]

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter({"input": s} for s in samples)

        def get_next(self):
            return next(self.items, None)

    float_path, int8_path = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(small_cnn(), float_path)
    quantize_static(str(float_path), str(int8_path), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    model = onnx.load(int8_path)
    ms = Model.Import(convert(model))
    layers = [n for n in ms.nodes if n.op in ("Conv2D", "FullConnection")]
    assert len(layers) == 3 and all(ms.tensors[n.inputs[1]].data_type == 32 for n in layers)     # int8 weights
    assert {n.rounding for n in layers} == {ONNXRUNTIME}
    feeds = {"input": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    # onnxruntime 1.32 rewrites int8 QDQ pairs to uint8 (QDQS8ToU8Transformer); on this graph, where it now also
    # quantizes BatchNormalization's scale, that rewrite moves the logits by up to 10 quanta away from the graph's
    # own arithmetic. Its fused integer kernels without that rewrite compute the graph as written.
    want = run_ort(model, feeds, disabled_optimizers=("QDQS8ToU8Transformer",))["logits"]
    got = run_lite(session_for(model), feeds)["logits"]
    np.testing.assert_array_equal(got, want)


# ---- fast paths: float64 requantization, K splitting, depthwise bands ------------------------------------------------
def requantizer_case(rng: np.random.Generator, reals: np.ndarray, bias: np.ndarray, bound: int, zp: int
                     ) -> tuple[np.ndarray, list[list[int]]]:
    """Accumulators (int64 [10000, channels]: several chunks of `Requantizer.bind`) at and around every rounding
    step each channel reaches within |acc| <= bound, plus random ones, and the reference outputs for them."""
    cols = []
    for real, b in zip(reals, bias):
        steps = (np.arange(-128, 128) - zp - 0.5) / real - b          # acc + bias where y steps, about
        near = np.round(steps)[:, None] + np.arange(-2, 3)
        near = near[np.abs(near) <= bound]
        cols.append(np.concatenate([near, rng.integers(-bound, bound + 1, 10000 - len(near))]).astype(np.int64))
    acc = np.stack(cols, axis=1)
    want = [[ref_requantize(int(v) + int(b), float(r), zp, -128, 127) for v, r, b in zip(row, reals, bias)]
            for row in acc]
    return acc, want


@pytest.mark.parametrize("reals", [
    [0.5, 2.0 ** -7, 0.003, 1.7e-5, 0.37, 1.0, 3.5],            # ties of powers of two, real >= 1, tiny reals
    [2.0 ** -20, 1e-9, 2.0 ** -33, 0.01 * 2 ** -12],             # long shifts: checked step by step at compile time
])
def test_requantizer_matches_reference_at_every_step(reals):
    """The float64 form (per-channel multipliers and biases) against the reference, from int64, float32 and
    float64 accumulators, through the chunked prebound run."""
    from lite.kernels.int8.requantize import Requantizer
    rng = np.random.default_rng(len(reals))
    reals = np.array(reals)
    bias = rng.integers(-40000, 40000, len(reals))
    bound = 1 << 23
    acc, want = requantizer_case(rng, reals, bias, bound, -9)
    rq = Requantizer.build(reals, -9, -128, 127, bias, acc_bound=bound)
    assert rq.exact
    for dtype in (np.int64, np.float32, np.float64):
        got = np.empty(acc.shape, np.int8)
        rq.bind(acc.astype(dtype), got, np.empty(Requantizer.work(acc.shape).shape, np.uint8))()
        assert got.tolist() == want, dtype


def test_requantizer_falls_back_to_integers_when_float64_cannot_be_proven():
    """acc * real + bias * real rounds below the step y = 34 at acc + bias = 1103685 (exactly
    161.99999999999994 instead of 162 = 34 + 128 in float64), so the integer reference runs instead."""
    from lite.kernels.int8.requantize import Requantizer
    rng = np.random.default_rng(3)
    reals, bias, bound = np.array([2135892877 * 2.0 ** -46]), np.array([-16777215]), 1 << 25
    acc, want = requantizer_case(rng, reals, bias, bound, 0)
    acc[0, 0] = 1103685 + 16777215
    want[0][0] = ref_requantize(1103685, float(reals[0]), 0, -128, 127)
    assert want[0][0] == 34
    rq = Requantizer.build(reals, 0, -128, 127, bias, acc_bound=bound)
    assert not rq.exact
    got = np.empty(acc.shape, np.int8)
    rq.bind(acc, got, np.empty(Requantizer.work(acc.shape).shape, np.uint8))()
    assert got.tolist() == want


def test_conv2d_splits_depth_when_weights_saturate():
    """Weights of +-127 make the per-channel L1 bound pass 2^24 at K = 9 * 130: the GEMM runs in two K ranges."""
    from lite.kernels.int8.common import exact_ranges
    rng = np.random.default_rng(43)
    x = rng.integers(-128, 128, (1, 3, 3, 130)).astype(np.int8)
    wt = (rng.integers(0, 2, (3, 3, 3, 130)) * 254 - 127).astype(np.int8)
    assert len(exact_ranges(wt.reshape(3, -1).T.astype(np.int64), 128)) == 2
    bias = rng.integers(-3000, 3000, 3).astype(np.int32)
    s_w, s_x, zp_x, s_y, zp_y = np.array([0.01, 0.02, 0.03]), 0.05, 7, 400.0, -3
    got = run_node("Conv2D", [(x, qparams([s_x], [zp_x])), (wt, qparams(s_w, [0] * 3)),
                              (bias, qparams(s_x * s_w, [0] * 3))], qparams([s_y], [zp_y]),
                   kernel_h=3, kernel_w=3, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1)
    acc = ref_conv(x, wt, bias.tolist(), zp_x, 1, 1, 1)
    want = [[[[ref_requantize(v, s_x * float(s_w[o]) / s_y, zp_y, -128, 127) for o, v in enumerate(px)]
              for px in row] for row in img] for img in acc]
    assert got.tolist() == want


def test_depthwise_conv_over_several_bands_matches_reference():
    """An output larger than one depthwise band (2^16 elements): every band pads with the zero point."""
    rng = np.random.default_rng(47)
    c = 48
    x = rng.integers(-128, 128, (1, 38, 38, c)).astype(np.int8)
    wt = weight_values(rng, (c, 3, 3, 1), 8)
    bias = rng.integers(-3000, 3000, c).astype(np.int32)
    s_w, s_x, zp_x, s_y, zp_y = rng.uniform(0.005, 0.05, c), 0.05, -11, 0.4, 4
    got = run_node("Conv2D", [(x, qparams([s_x], [zp_x])), (wt, qparams(s_w, [0] * c)),
                              (bias, qparams(s_x * s_w, [0] * c))], qparams([s_y], [zp_y]), kernel_h=3, kernel_w=3,
                   pad_top=1, pad_bottom=1, pad_left=1, pad_right=1, group=c, activation=A.RELU)
    lo, hi = ref_clamp(A.RELU, s_y, zp_y, -128, 127)
    acc = ref_conv(x, wt, bias.tolist(), zp_x, 1, 1, c)
    want = [[[[ref_requantize(v, s_x * float(s_w[o]) / s_y, zp_y, lo, hi) for o, v in enumerate(px)]
              for px in row] for row in img] for img in acc]
    assert got.tolist() == want
