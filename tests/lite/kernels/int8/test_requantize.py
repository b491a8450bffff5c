"""The numpy exactness check of `Requantizer` (`channel_forms`) against the Python-int one (`channel_form`): the
same (scale, offset) bit for bit and the same decisions, on random and edge-case multipliers, biases and bounds."""
import numpy as np
import pytest


def random_channels(rng: np.random.Generator, count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Reals over 17 decades, powers of two and their float64 neighbours, full 31-bit M0 at long shifts;
    biases and bounds of every magnitude up to past 2^32 (where the Python-int form takes over)."""
    q = count // 4
    near_two = 2.0 ** rng.integers(-40, 25, q) * (1 + rng.choice([-1, 1], q) * rng.integers(0, 4, q) * 2.0 ** -52)
    reals = np.concatenate([np.exp(rng.uniform(np.log(1e-10), np.log(3e7), count - 3 * q)), near_two,
                            rng.integers(1 << 30, 1 << 31, q) * 2.0 ** rng.integers(-62, -20, q),
                            (rng.integers(1 << 30, 1 << 31, q) | 1) * 2.0 ** rng.integers(-52, -40, q)])
    bias = rng.integers(-(1 << 33), 1 << 33, count) >> rng.integers(0, 34, count)
    bound = rng.integers(0, 1 << 33, count) >> rng.integers(0, 34, count)
    return reals, bias, bound


EDGES = [  # (real, bias, bound)
    (2135892877 * 2.0 ** -46, -16777215, 1 << 25),          # float64 cannot be proven: a step rounds below
    (0.0, 5, 1 << 31), (1e-12, 0, 1 << 31), (2.0 ** -62, -(1 << 31), 1 << 31),
    (2.0 ** -32 * (1 - 2.0 ** -53), 1 << 30, 1 << 31), (0.5, 0, 0), (1.0, -3, 1 << 20),
    (2.0 ** 19, 1, 300), (2.0 ** 20, 1, 300), (2.0 ** 24 * (1 + 2.0 ** -52), 0, 1 << 31),
    (0.37, (1 << 32) - 1, 1), (0.37, -(1 << 31), 1 << 31), (0.37, 0, (1 << 32) - 1), (0.37, 7, 1 << 40),
]


@pytest.mark.parametrize("zero_point,lo,hi,count", [(-128, -128, 127, 2000), (0, -128, 127, 2000),
                                                    (5, -127, 127, 1000), (0, 0, 255, 1000), (-7, -8, 7, 1000),
                                                    (100, -16384, 16383, 40)])
def test_channel_forms_match_python_int_reference(zero_point, lo, hi, count):
    from lite.kernels.int8.requantize import channel_form, channel_forms, quantize_multipliers
    rng = np.random.default_rng(count + abs(lo) + zero_point ** 2)
    reals, bias, bound = random_channels(rng, count)
    reals = np.concatenate([reals, [e[0] for e in EDGES]])
    bias = np.concatenate([bias, [e[1] for e in EDGES]])
    bound = np.concatenate([bound, [e[2] for e in EDGES]])
    m0, n = quantize_multipliers(reals)
    scale, offset, exact = channel_forms(m0, n, bias, bound, zero_point, lo, hi)
    want = [channel_form(int(a), int(b), int(c), int(d), zero_point, lo, hi) for a, b, c, d in zip(m0, n, bias, bound)]
    assert scale.view(np.int64).tolist() == np.array([w[0] for w in want]).view(np.int64).tolist()
    assert offset.view(np.int64).tolist() == np.array([w[1] for w in want]).view(np.int64).tolist()
    assert exact.tolist() == [w[2] for w in want]
    if (zero_point, lo, hi) == (0, -128, 127):
        assert not exact[count]


def test_channel_forms_take_python_int_bounds():
    """Bounds past int64 (an object array) go to the Python-int form."""
    from lite.kernels.int8.requantize import channel_form, channel_forms, quantize_multipliers
    m0, n = quantize_multipliers(np.array([0.01, 0.01]))
    bound = np.array([1 << 70, 1 << 20], object)
    got = channel_forms(m0, n, np.array([3, 3]), bound, 0, -128, 127)
    want = [channel_form(int(m0[k]), int(n[k]), 3, bound[k], 0, -128, 127) for k in range(2)]
    assert [(float(got[0][k]), float(got[1][k]), bool(got[2][k])) for k in range(2)] == want


def test_quantize_multipliers_match_scalar_form():
    from lite.kernels.int8.requantize import quantize_multiplier, quantize_multipliers
    rng = np.random.default_rng(9)
    twos = 2.0 ** np.arange(-40, 30)
    reals = np.concatenate([rng.uniform(0, 4, 200), np.exp(rng.uniform(-60, 20, 200)), [0.0, 1e-300], twos,
                            np.nextafter(twos, 0), np.nextafter(twos, np.inf), (1 - 2.0 ** -32) * twos])
    m0, n = quantize_multipliers(reals.reshape(-1, 2))
    assert list(zip(m0.ravel().tolist(), n.ravel().tolist())) == [quantize_multiplier(float(r)) for r in reals]
    with pytest.raises(ValueError):
        quantize_multipliers([0.5, -1.0])


def test_proven_channels_match_the_integer_formula_at_every_accumulator():
    """Soundness against TFLite's integer formula itself: wherever the check says exact, float64 gives the same
    output for every |acc| <= bound (all of them, small bounds)."""
    from lite.kernels.int8.requantize import (F64, I16, channel_forms, float_form, multiply_by_quantized_multiplier,
                                              quantize_multipliers)
    rng = np.random.default_rng(11)
    reals = np.exp(rng.uniform(np.log(1e-4), np.log(40.0), 300))
    bias = rng.integers(-(1 << 20), 1 << 20, 300)
    bound = rng.integers(0, 3000, 300)
    m0, n = quantize_multipliers(reals)
    scale, offset, exact = channel_forms(m0, n, bias, bound, -5, -128, 127)
    assert exact.all()
    for c in range(300):
        acc = np.arange(-bound[c], bound[c] + 1)
        want = np.clip(multiply_by_quantized_multiplier((acc + bias[c]).astype(object), int(m0[c]), int(n[c])) - 5,
                       -128, 127).astype(np.int64)
        got = np.empty(len(acc), np.int64)
        float_form(acc.astype(F64), scale[c], offset[c], -128, 127, True, got, np.empty(len(acc)),
                   np.empty(len(acc), I16))
        assert got.tolist() == want.tolist(), c


def nnacl_c(x: int, m0: int, n: int) -> int:
    """MindSpore Lite's MultiplyByQuantizedMultiplier as its C reads, one Python int at a time: x shifted left by
    max(n, 0); the doubling high multiply, nudged by 2^30 (1 - 2^30 below zero) and divided by 2^31 truncating;
    then the rounding division by 2^max(-n, 0), whose remainder must pass half the divisor (plus one below zero)."""
    ab = x * (1 << max(n, 0)) * m0
    nudged = ab + ((1 << 30) if ab >= 0 else 1 - (1 << 30))
    high = abs(nudged) // (1 << 31) * (1 if nudged >= 0 else -1)
    r = max(-n, 0)
    mask = (1 << r) - 1
    return (high >> r) + int((high & mask) > (mask >> 1) + int(high < 0))


@pytest.mark.parametrize("zero_point,lo", [(-3, -128), (-128, -128), (10, 10)])
def test_nnacl_rounding_matches_mindspore_lites_integer_formula(zero_point: int, lo: int):
    """`NNACL`'s float form (bound through its work buffer, with its branch below zero) and its int64 form give
    the C formula's clamped outputs at every accumulator near each output step and at random ones."""
    from lite.kernels.int8.requantize import NNACL, Requantizer, multiply_by_quantized_multiplier, quantize_multipliers
    rng = np.random.default_rng(41)
    reals = np.concatenate([np.exp(rng.uniform(np.log(1e-5), np.log(4.0), 14)), [0.5, 2.0 ** -9]])
    bias = rng.integers(-3000, 3000, len(reals))
    m0, n = quantize_multipliers(reals)
    acc = np.concatenate([rng.integers(-60000, 60000, 3000), np.arange(-2000, 2000)])[:, None].astype(np.float32)
    acc = np.ascontiguousarray(np.broadcast_to(acc, (len(acc), len(reals))))
    step = np.rint(np.arange(-130, 130)[:, None] / reals - bias)          # accumulators where outputs step
    acc[:len(step)] = np.clip(step, -60000, 60000)
    rq = Requantizer.build(reals, zero_point, lo, 127, bias, 60000, rounding=NNACL)
    assert rq.exact and (rq.below is None) == (lo >= zero_point)
    want = np.array([[min(max(nnacl_c(int(a) + int(b), int(m), int(k)) + zero_point, lo), 127)
                      for a, b, m, k in zip(row, bias, m0, n)] for row in acc])
    out = np.empty(acc.shape, np.int8)
    rq.bind(acc, out, np.empty(Requantizer.work(acc.shape).shape, np.uint8))()
    np.testing.assert_array_equal(out, want)
    integer = multiply_by_quantized_multiplier(acc.astype(np.int64) + bias, m0, n, NNACL)
    np.testing.assert_array_equal(np.clip(integer + zero_point, lo, 127), want)


def test_onnxruntime_rounding_matches_float32_steps_on_ties():
    """`ONNXRUNTIME` (numpy, in one step and through its work buffer) against MLAS's float32 steps computed
    exactly: sums next to every half-way point of each channel's multiplier, where the float32 product lands
    on the tie (half to even) even when the exact product does not, and sums past 2^24 (rounded to float32)."""
    from fractions import Fraction
    from lite.kernels.int8.requantize import ONNXRUNTIME, Requantizer
    from tests.lite.kernels.int8.test_kernels import f32
    multipliers = np.array([2.0 ** -5, 0.3, 1 / 3, 0.0123, 7.1e-4], np.float32)
    bias, zp, lo, hi = np.array([5, -7, 0, 1000, -1 << 20]), -3, -128, 127
    columns = []
    for m, b in zip(multipliers.astype(float), bias):
        ties = [round((k + 0.5) / m) + d - b for k in range(-130, 130) for d in (-1, 0, 1)]
        columns.append(ties + [(1 << 25) + 3 - b, -(1 << 25) - 1 - b])
    acc = np.array(columns, np.int64).T
    want = np.array([[min(max(round(Fraction(f32(f32(float(v + b)) * float(m)))) + zp, lo), hi)
                      for v, m, b in zip(row, multipliers.astype(float), bias)] for row in acc.tolist()])
    exact = np.array([[min(max(round(Fraction(int(v + b)) * Fraction(float(m))) + zp, lo), hi)
                       for v, m, b in zip(row, multipliers.astype(float), bias)] for row in acc.tolist()])
    assert (exact != want).any()                 # the float32 product's rounding decides some ties
    rq = Requantizer.build(multipliers, zp, lo, hi, bias, rounding=ONNXRUNTIME)
    out = np.empty(acc.shape, np.int8)
    rq(acc.astype(np.float64), out)
    np.testing.assert_array_equal(out, want)
    work = np.empty(Requantizer.work(acc.shape).shape, np.uint8)
    bound = np.zeros(acc.shape, np.int8)
    rq.bind(acc.astype(np.float64), bound, work)()
    np.testing.assert_array_equal(bound, want)
