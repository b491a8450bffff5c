"""The compiled int8 kernels (lite/kernels/compiled/int8.py) and the numpy path of dense int8 Conv2D, bit for bit
against the pure-integer reference of tests/lite/kernels/int8/test_kernels.py: odd M, K and N (partial register tiles, odd
K-pairs), per-channel and per-tensor scales, input/output/weight zero points, fused RELU/RELU6, K deep enough
that the float32 path splits it, padded, strided and dilated windows (int8 im2col), the threaded form, and
FullConnection, which runs the same GEMM; the Add/Mul table gather over every input pair; and the
float32 -> integer quantize pass."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from lite.compiler import evaluate, infer_quantized, select_kernel
from lite.kernel import Kernel, TensorSpec
from lite.kernel import selection
from lite.model import NodeDef
from schema import attrs as op_attrs
from schema import fb
from tests.lite.kernels.int8.test_kernels import (act_params, qparams, ref_add, ref_clamp, ref_conv, ref_mul, ref_requantize,
                                    weight_values)
from tests.lite.kernels.int8.test_kernels import test_full_connection_matches_integer_reference as full_connection_case

A = fb.ActivationType
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
PATHS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"))]

CASES = {
    # (N, H, W, C, O, K, stride, pad, bits, per_channel, weight zero points, activation)
    "pointwise_odd": (1, 7, 9, 37, 45, 1, 1, 0, 8, True, False, A.RELU6),
    "pointwise_batch2": (2, 5, 5, 16, 96, 1, 1, 0, 8, False, False, A.RELU),
    "pointwise_weight_zp": (1, 4, 5, 11, 19, 1, 1, 0, 8, True, True, A.NO_ACTIVATION),
    "pointwise_strided": (1, 8, 8, 24, 20, 1, 2, 0, 8, True, False, A.RELU),
    "dense_3x3_padded": (1, 9, 8, 5, 33, 3, 1, 1, 8, True, False, A.RELU),
    "dense_3x3_stride2": (1, 15, 15, 5, 32, 3, 2, 1, 8, True, False, A.RELU6),   # 5 channels: above the tiles
    "narrow_5bit": (1, 6, 5, 7, 17, 3, 1, 1, 5, True, False, A.NO_ACTIVATION),
}


def conv_spec(case: tuple, seed: int, saturated: bool = False):
    """Inputs, attributes and output params of one int8 Conv2D, and the integer reference's output."""
    n, h, w, c, o, k, stride, pad, bits, per_channel, weight_zp, activation = case
    rng = np.random.default_rng(seed)
    s_x, zp_x, lo, hi = act_params(rng, bits)
    _, zp_y, _, _ = act_params(rng, bits)
    x = rng.integers(lo, hi + 1, (n, h, w, c)).astype(np.int8)
    if saturated:                                    # +-127: the float32 path must split K
        wt = (rng.integers(0, 2, (o, k, k, c)) * 254 - 127).astype(np.int8)
    else:
        wt = weight_values(rng, (o, k, k, c), bits)
    depth = k * k * c                                # real sums of about +-4, outputs of scale ~8 / 2^(bits-1)
    s_w = rng.uniform(0.5, 1.5, o if per_channel else 1) * 4 / (s_x * 0.33 * (1 << 2 * bits - 2) * np.sqrt(depth))
    zp_w = rng.integers(-3, 4, len(s_w)) if weight_zp else np.zeros(len(s_w), np.int64)
    bias = rng.integers(-3000, 3000, o).astype(np.int32)
    s_y = rng.uniform(6, 10) / (1 << bits - 1)
    inputs = [(x, qparams([s_x], [zp_x], bits)), (wt, qparams(s_w, zp_w, bits)),
              (bias, qparams(s_x * s_w, [0] * len(s_w)))]
    attrs = dict(kernel_h=k, kernel_w=k, stride_h=stride, stride_w=stride, pad_top=pad, pad_bottom=pad,
                 pad_left=pad, pad_right=pad, activation=activation)
    centred = wt.astype(np.int64) - np.broadcast_to(zp_w, (o,))[:, None, None, None]
    acc = ref_conv(x, centred, bias.tolist(), zp_x, stride, pad, 1)
    lo, hi = ref_clamp(activation, s_y, zp_y, lo, hi)
    s_w = np.broadcast_to(s_w, (o,))
    want = [[[[ref_requantize(v, s_x * float(s_w[q]) / s_y, zp_y, lo, hi) for q, v in enumerate(px)]
              for px in row] for row in img] for img in acc]
    return inputs, attrs, qparams([s_y], [zp_y], bits), want


def run_conv(inputs, attrs, out_params, kernels: str, threads: int = 1, op: str = "Conv2D", rounding: str = "tflite"
             ) -> tuple[np.ndarray, Kernel]:
    """Compile and run one node on `kernels` (x is not a constant, so nothing folds), rounding by `rounding`."""
    node = NodeDef("node", op, op_attrs.build(op, attrs), list(range(len(inputs))), [len(inputs)],
                   rounding=rounding)
    specs = [TensorSpec(a.shape, a.dtype, a if i else None, p) for i, (a, p) in enumerate(inputs)]
    with selection(kernels, threads):
        kernel = select_kernel(node, specs)
        kernel.out_quant = [out_params]
        outs = infer_quantized(kernel, node, specs)
        specs[0] = TensorSpec(specs[0].shape, specs[0].dtype, inputs[0][0], specs[0].quant)
        got = evaluate(kernel, node, specs, outs)[0].value
    return got, kernel


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("name", CASES)
def test_int8_conv_gemm_matches_integer_reference(name: str, kernels: str) -> None:
    inputs, attrs, out, want = conv_spec(CASES[name], seed=len(name))
    got, kernel = run_conv(inputs, attrs, out, kernels)
    assert getattr(kernel, "compiled_gemm", False) == (kernels == "compiled")
    assert got.tolist() == want


@pytest.mark.parametrize("kernels", PATHS)
def test_int8_conv_gemm_with_depth_the_float_path_splits(kernels: str) -> None:
    """K = 2100 of +-127 weights: float32 needs three K ranges; int32 accumulators need none."""
    from lite.kernels.int8.common import exact_ranges
    inputs, attrs, out, want = conv_spec((1, 3, 4, 2100, 17, 1, 1, 0, 8, True, False, A.RELU), 5, saturated=True)
    got, kernel = run_conv(inputs, attrs, out, kernels)
    assert len(exact_ranges(kernel.centred.T, 128)) == 3
    assert getattr(kernel, "compiled_gemm", False) == (kernels == "compiled")
    assert got.tolist() == want


@pytest.mark.parametrize("kernels", PATHS)
def test_dilated_int8_conv_matches_integer_reference(kernels: str) -> None:
    """A 3x3 window at dilation 2, stride 2, pad 2: the reference is the 5x5 convolution whose weight has zeros
    between the taps."""
    inputs, attrs, out, _ = conv_spec((1, 11, 10, 6, 21, 3, 2, 2, 8, True, False, A.RELU), 31)
    (x, qx), (wt, qw), (bias, _) = inputs
    spread = np.zeros((21, 5, 5, 6), np.int64)
    spread[:, ::2, ::2] = wt
    got, kernel = run_conv(inputs, dict(attrs, dilation_h=2, dilation_w=2), out, kernels)
    assert getattr(kernel, "compiled_gemm", False) == (kernels == "compiled")
    s_x, zp_x, s_y, zp_y = qx[0].scale, qx[0].zeroPoint, out[0].scale, out[0].zeroPoint
    lo, hi = ref_clamp(A.RELU, s_y, zp_y, -128, 127)
    want = [[[[ref_requantize(v, s_x * qw[q].scale / s_y, zp_y, lo, hi) for q, v in enumerate(px)] for px in row]
             for row in img] for img in ref_conv(x, spread, bias.tolist(), zp_x, 2, 2, 1)]
    assert got.tolist() == want


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_threaded_int8_conv_gemm_matches_integer_reference() -> None:
    """Enough work for the threaded form: row chunks of whole tiles and the last, partial one."""
    inputs, attrs, out, want = conv_spec((1, 23, 23, 64, 62, 1, 1, 0, 8, True, False, A.RELU6), 11)
    from lite.kernels.compiled.int8 import gemm_requantize
    got, kernel = run_conv(inputs, attrs, out, "compiled", threads=2)
    threaded = gemm_requantize.forms.get(True)
    assert kernel.compiled_gemm and threaded is not None
    assert kernel.call.func in [o.entry_point for o in threaded.overloads.values()]
    assert got.tolist() == want


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("rows, depth, out", [(1, 1280, 37), (7, 2000, 3), (13, 33, 70)])
def test_int8_full_connection_matches_integer_reference(rows: int, depth: int, out: int, kernels: str) -> None:
    """x [rows, depth] @ W^T per channel, RELU; as conv_spec's 1x1 case over `rows` pixels (the reference is
    the convolution's), then through test_int8_kernels' own FullConnection reference."""
    inputs, _, out_params, want = conv_spec((1, 1, rows, depth, out, 1, 1, 0, 8, True, False, A.RELU), rows)
    (x, qx), (w, qw), bias = inputs
    got, kernel = run_conv([(x.reshape(rows, depth), qx), (w.reshape(out, depth), qw), bias],
                           dict(activation=A.RELU), out_params, kernels, op="FullConnection")
    assert kernel.compiled == (kernels == "compiled")
    assert got.tolist() == want[0][0]
    with selection(kernels):
        full_connection_case(rows, depth, out, 8, A.RELU6)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op, ref, activation", [("Add", ref_add, A.RELU), ("Mul", ref_mul, A.NO_ACTIVATION)])
def test_int8_binary_of_one_shape_matches_integer_reference(op: str, ref, activation: int, kernels: str) -> None:
    """Every (a, b) pair of int8 values once, as two [256, 256] tensors of one shape."""
    rng = np.random.default_rng(23)
    qa, qb, qy = (act_params(rng, 8)[:2] for _ in range(3))
    grid = np.arange(-128, 128)
    a, b = (v.astype(np.int8) for v in np.meshgrid(grid, grid, indexing="ij"))
    got, kernel = run_conv([(a, qparams([qa[0]], [qa[1]])), (b, qparams([qb[0]], [qb[1]]))],
                           dict(activation=activation), qparams([qy[0]], [qy[1]]), kernels, op=op)
    assert kernel.compiled == (kernels == "compiled")
    lo, hi = ref_clamp(activation, qy[0], qy[1], -128, 127)
    assert got.ravel().tolist() == [ref(int(p), int(q), qa, qb, qy, lo, hi) for p, q in zip(a.ravel(), b.ravel())]


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("dtype, dst_t", [(np.int8, 32), (np.uint8, 37), (np.int16, 33)])
def test_quantize_matches_onnx_reference(dtype: type, dst_t: int, kernels: str) -> None:
    """float32 -> integer QuantDTypeCast against onnx.reference's QuantizeLinear: ties (k + 1/2) * scale round
    to even, values beyond the range saturate; infinities saturate and NaN becomes the low end."""
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    rng = np.random.default_rng(29)
    info = np.iinfo(dtype)
    scale, zp = np.float32(0.125), int(info.min) // 2 + int(info.max) // 2 + 3
    ties = (rng.integers(-300, 300, 500) + 0.5).astype(np.float32) * scale
    x = np.concatenate([ties, rng.uniform(-60, 60, 997).astype(np.float32) * scale * 8]).reshape(1, 3, 499)
    params = qparams([scale], [zp], 8 * np.dtype(dtype).itemsize)
    got, kernel = run_conv([(x, None)], dict(src_t=43, dst_t=dst_t), params, kernels, op="QuantDTypeCast")
    assert kernel.compiled == (kernels == "compiled")
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])
    y_type = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", y_type, x.shape)],
                              [numpy_helper.from_array(np.array(scale), "s"),
                               numpy_helper.from_array(np.array(zp, dtype), "z")])
    want = ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
    special = np.array([[[np.inf, -np.inf, np.nan]]], np.float32)
    got, _ = run_conv([(special, None)], dict(src_t=43, dst_t=dst_t), params, kernels, op="QuantDTypeCast")
    assert got.ravel().tolist() == [info.max, info.min, info.min]


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("dtype, dst_t", [(np.int8, 32), (np.uint8, 37)])
def test_casts_with_constant_one_element_scale_and_zero_point_inputs(dtype: type, dst_t: int, kernels: str) -> None:
    """QuantDTypeCast's general form with constant one-element scale and zero point inputs (as the integer form of
    an onnxruntime QDQ layer centres and requantizes, with scale 1) runs compiled: quantizing rounds ties to even
    and saturates, dequantizing is (q - zp) * s (a power-of-two scale keeps both references exact)."""
    rng = np.random.default_rng(31)
    scale, zp = np.array(0.25, np.float32), np.array(7 if dtype == np.int8 else 130, dtype)
    x = np.concatenate([rng.integers(-150, 150, 500) + 0.5, rng.uniform(-60, 60, 497)]).astype(np.float32)
    x = (x * scale).reshape(1, 1, 997)
    got, kernel = run_conv([(x, None), (scale, None), (zp, None)], dict(src_t=43, dst_t=dst_t), [], kernels,
                           op="QuantDTypeCast")
    assert kernel.compiled == (kernels == "compiled")
    info = np.iinfo(dtype)
    np.testing.assert_array_equal(got, np.clip(np.rint(x.astype(np.float64) / 0.25) + int(zp), info.min, info.max))
    back, kernel = run_conv([(got, None), (scale, None), (zp, None)], dict(src_t=dst_t, dst_t=43), [], kernels,
                            op="QuantDTypeCast")
    assert kernel.compiled == (kernels == "compiled") and back.dtype == np.float32
    np.testing.assert_array_equal(back, (got.astype(np.float64) - int(zp)) * 0.25)


@pytest.mark.parametrize("kernels", PATHS)
def test_quantize_with_mindspore_lites_rounding_takes_ties_away_from_zero(kernels: str) -> None:
    """A node rounding as MindSpore Lite's kernels do: x * (1 / s) + zp rounded half away from zero (a power-of-two
    scale makes every step exact, so the reference is plain arithmetic), saturating; NaN becomes the low end."""
    rng = np.random.default_rng(30)
    scale, zp = 0.125, 3
    ties = (rng.integers(-140, 140, 600) + 0.5) * scale
    x = np.concatenate([ties, rng.uniform(-20, 20, 397)]).astype(np.float32).reshape(1, 1, 997)
    got, kernel = run_conv([(x, None)], dict(src_t=43, dst_t=32), qparams([scale], [zp]), kernels,
                           op="QuantDTypeCast", rounding="nnacl")
    assert kernel.compiled == (kernels == "compiled")
    v = x.astype(np.float64) / scale + zp
    want = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5), -128, 127)
    np.testing.assert_array_equal(got, want)
    special = np.array([[[np.inf, -np.inf, np.nan]]], np.float32)
    got, _ = run_conv([(special, None)], dict(src_t=43, dst_t=32), qparams([scale], [zp]), kernels,
                      op="QuantDTypeCast", rounding="nnacl")
    assert got.ravel().tolist() == [127, -128, -128]
