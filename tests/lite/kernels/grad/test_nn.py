"""Neural-network gradient kernels and the train-mode forwards (BatchNorm, Dropout, LayerNorm statistics), each
driven directly as a compiled plan would drive it and checked against PyTorch autograd in float64.

Layouts: our activations are NHWC and conv weights OHWI; the PyTorch oracles run NCHW / OIHW, so inputs are
permuted on the way in and gradients on the way out. Errors are norm-wise: max |ours - torch| / max |torch|.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from lite.compiler import fold_or_infer, infer_node, select_kernel
from lite.kernel import Kernel, TensorSpec
from lite.kernels import conv2d
from lite.model import NodeDef
from lite.status import InferShapeError, NotSupportedError
from schema import attrs as op_attrs
from schema import fb
from tests.oracles.torch_autograd import autograd, rel

A, P = fb.ActivationType, fb.PadMode
TOL = 1e-4
rng = np.random.default_rng(0)


def f32(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def node_of(op: str, n_in: int, n_out: int, attrs: dict[str, Any] | None = None) -> NodeDef:
    return NodeDef(op, op, op_attrs.build(op, attrs or {}), list(range(n_in)), list(range(n_in, n_in + n_out)))


def compiled(op: str, inputs: Sequence[np.ndarray], n_out: int, attrs: dict[str, Any] | None = None
             ) -> tuple[Kernel, list[np.ndarray]]:
    """Compile one node as a plan would, every input a runtime array (no compile-time value); outputs and scratch
    start as NaN so an element the kernel forgets to write shows. Returns the bound kernel and its outputs."""
    node = node_of(op, len(inputs), n_out, attrs)
    specs = [TensorSpec(a.shape, a.dtype) for a in inputs]
    kernel = select_kernel(node, specs)
    outs = infer_node(kernel, node, specs)
    arrays = [np.full(s.shape, np.nan, s.dtype) for s in outs]
    scratch = [np.full(s.shape, np.nan, s.dtype) for s in kernel.scratch()]
    kernel.bind(list(inputs), arrays, scratch)
    return kernel, arrays


def run_op(op: str, inputs: Sequence[np.ndarray], n_out: int, attrs: dict[str, Any] | None = None
           ) -> list[np.ndarray]:
    kernel, arrays = compiled(op, inputs, n_out, attrs)
    kernel.run(list(inputs), arrays)
    return arrays


def nchw(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 3, 1, 2)


def nhwc(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1)


# ---- activations ---------------------------------------------------------------------------------------------
ACTIVATIONS = {
    "relu": (dict(type=A.RELU), F.relu),
    "relu6": (dict(type=A.RELU6), F.relu6),
    "sigmoid": (dict(type=A.SIGMOID), torch.sigmoid),
    "tanh": (dict(type=A.TANH), torch.tanh),
    "hswish": (dict(type=A.HSWISH), F.hardswish),
    "hsigmoid": (dict(type=A.HSIGMOID, alpha=1 / 6, beta=0.5), F.hardsigmoid),
    "swish": (dict(type=A.SWISH), F.silu),
    "elu": (dict(type=A.ELU, alpha=0.7), lambda x: F.elu(x, 0.7)),
    "leaky_relu": (dict(type=A.LEAKY_RELU, alpha=0.1), lambda x: F.leaky_relu(x, 0.1)),
    "hard_tanh": (dict(type=A.HARD_TANH, min_val=-0.5, max_val=1.5), lambda x: F.hardtanh(x, -0.5, 1.5)),
    "gelu": (dict(type=A.GELU), F.gelu),
}


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_grad_matches_autograd(name: str) -> None:
    attrs, fn = ACTIVATIONS[name]
    x, dy = f32(2, 5, 7, 3, low=-8, high=8), f32(2, 5, 7, 3)
    (dx,) = run_op("ActivationGrad", [dy, x], 1, attrs)
    assert rel(dx, autograd(fn, dy, x)[0]) < TOL


@pytest.mark.parametrize("name", ["relu", "relu6", "hard_tanh", "leaky_relu", "elu", "hswish"])
def test_activation_grad_at_the_kinks_follows_autograd(name: str) -> None:
    attrs, fn = ACTIVATIONS[name]
    x = np.array([-3.0, -0.5, 0.0, 1.5, 3.0, 6.0], np.float32)
    dy = np.ones_like(x)
    (dx,) = run_op("ActivationGrad", [dy, x], 1, attrs)
    np.testing.assert_allclose(dx, autograd(fn, dy, x)[0].numpy(), rtol=1e-6, atol=1e-7)


# ---- convolution ---------------------------------------------------------------------------------------------
def onnx_same(size: int, kernel: int, stride: int, dilation: int, upper: bool) -> tuple[int, int]:
    """ONNX auto_pad SAME_*: the pads that give ceil(size / stride) outputs."""
    total = max(0, (-(-size // stride) - 1) * stride + (kernel - 1) * dilation + 1 - size)
    return (total // 2, total - total // 2) if upper else (total - total // 2, total // 2)


def explicit_pads(attrs: dict[str, Any], h: int, w: int, kh: int, kw: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of a conv or pool attribute set."""
    mode = attrs.get("pad_mode", P.PAD)
    if mode == P.VALID:
        return 0, 0, 0, 0
    if mode in (P.SAME_UPPER, P.SAME_LOWER):
        upper = mode == P.SAME_UPPER
        return (*onnx_same(h, kh, attrs.get("stride_h", 1), attrs.get("dilation_h", 1), upper),
                *onnx_same(w, kw, attrs.get("stride_w", 1), attrs.get("dilation_w", 1), upper))
    return tuple(attrs.get(k, 0) for k in ("pad_top", "pad_bottom", "pad_left", "pad_right"))


def torch_conv(attrs: dict[str, Any], x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Conv2D on NHWC x and OHWI w with PyTorch, NHWC out."""
    top, bottom, left, right = explicit_pads(attrs, x.shape[1], x.shape[2], w.shape[1], w.shape[2])
    xp = F.pad(nchw(x), (left, right, top, bottom))
    y = F.conv2d(xp, nchw(w), stride=(attrs.get("stride_h", 1), attrs.get("stride_w", 1)),
                 dilation=(attrs.get("dilation_h", 1), attrs.get("dilation_w", 1)), groups=attrs.get("group", 1))
    return nhwc(y)


CONV = {   # x NHWC, weight OHWI, attributes
    "dense_3x3_pad1": ((2, 7, 6, 3), (4, 3, 3, 3), dict(pad_top=1, pad_bottom=1, pad_left=1, pad_right=1)),
    "dense_wide_3x3": ((2, 6, 5, 6), (5, 3, 3, 6), dict(pad_top=1, pad_bottom=1, pad_left=1, pad_right=1)),
    "strided_asymmetric": ((2, 11, 9, 3), (5, 3, 3, 3), dict(stride_h=2, stride_w=3, pad_top=1, pad_bottom=0,
                                                             pad_left=2, pad_right=1)),
    "dilated": ((1, 12, 12, 2), (3, 3, 3, 2), dict(dilation_h=2, dilation_w=3, pad_top=2, pad_bottom=1,
                                                   pad_left=2, pad_right=1)),
    "dilated_wide": ((1, 12, 13, 4), (3, 3, 3, 4), dict(dilation_h=2, dilation_w=3, pad_top=1, pad_bottom=2,
                                                        pad_left=3, pad_right=1)),
    "grouped": ((2, 8, 7, 4), (6, 3, 2, 2), dict(group=2, pad_top=1, pad_bottom=1, pad_right=1)),
    "grouped_strided": ((2, 9, 9, 6), (9, 3, 3, 2), dict(group=3, stride_h=2, stride_w=2, pad_top=1,
                                                         pad_left=1)),
    "depthwise": ((2, 10, 10, 8), (8, 3, 3, 1), dict(group=8, pad_top=1, pad_bottom=1, pad_left=1, pad_right=1)),
    "depthwise_stride2": ((2, 11, 10, 6), (6, 3, 3, 1), dict(group=6, stride_h=2, stride_w=2, pad_top=1,
                                                             pad_bottom=1, pad_left=1, pad_right=1)),
    "depthwise_5x5_dilated": ((1, 13, 12, 4), (4, 5, 5, 1), dict(group=4, dilation_h=2, pad_top=4, pad_bottom=4,
                                                                 pad_left=2, pad_right=2)),
    "depthwise_multiplier2": ((1, 7, 7, 4), (8, 3, 3, 1), dict(group=4, pad_top=1, pad_bottom=1, pad_left=1,
                                                               pad_right=1)),
    "depthwise_padding_only_taps": ((1, 4, 4, 3), (3, 3, 3, 1), dict(group=3, stride_h=3, stride_w=3,
                                                                     pad_top=2, pad_left=2, pad_bottom=2,
                                                                     pad_right=2)),
    "depthwise_pads_past_the_kernel": ((1, 5, 4, 2), (2, 3, 3, 1), dict(group=2, pad_top=3, pad_bottom=1,
                                                                        pad_left=4, pad_right=3)),
    "pointwise": ((2, 6, 5, 8), (16, 1, 1, 8), {}),
    "pointwise_stride2": ((2, 7, 7, 8), (16, 1, 1, 8), dict(stride_h=2, stride_w=2)),
    "same_upper": ((1, 10, 9, 3), (4, 3, 3, 3), dict(stride_h=2, stride_w=2, pad_mode=P.SAME_UPPER)),
    "same_lower": ((1, 10, 9, 3), (4, 4, 4, 3), dict(stride_h=2, stride_w=2, pad_mode=P.SAME_LOWER)),
    "valid": ((2, 10, 9, 3), (4, 3, 3, 3), dict(pad_mode=P.VALID, pad_top=5)),
}


def conv_case(name: str) -> tuple[dict[str, Any], np.ndarray, np.ndarray, np.ndarray]:
    """(attributes with the kernel size, x, w, dy) of a CONV case."""
    x_shape, w_shape, attrs = CONV[name]
    attrs = dict(attrs, kernel_h=w_shape[1], kernel_w=w_shape[2])
    x, w = f32(*x_shape), f32(*w_shape)
    dy = f32(*torch_conv(attrs, torch.tensor(x), torch.tensor(w)).shape)
    return attrs, x, w, dy


@pytest.mark.parametrize("name", CONV)
def test_conv2d_grad_input_matches_autograd(name: str) -> None:
    attrs, x, w, dy = conv_case(name)
    (dx,) = run_op("Conv2DGradInput", [dy, w, x], 1, attrs)
    want_x, _ = autograd(lambda tx, tw: torch_conv(attrs, tx, tw), dy, x, w)
    assert rel(dx, want_x) < TOL


@pytest.mark.parametrize("name", CONV)
def test_conv2d_grad_filter_matches_autograd(name: str) -> None:
    attrs, x, w, dy = conv_case(name)
    (dw,) = run_op("Conv2DGradFilter", [dy, x], 1, attrs)
    _, want_w = autograd(lambda tx, tw: torch_conv(attrs, tx, tw), dy, x, w)
    assert rel(dw, want_w) < TOL


@pytest.mark.parametrize("name", ["dense_3x3_pad1", "dense_wide_3x3", "strided_asymmetric", "grouped_strided"])
def test_conv2d_grad_filter_in_blocks_of_images_matches_autograd(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """dW sums the products of blocks of images (`COLUMN_BLOCK_BYTES` of columns each): here 2 of 5 images per
    block, the last block 1, in both column layouts (3 input channels: transposed; 6 and grouped: not)."""
    x_shape, w_shape, attrs = CONV[name]
    attrs = dict(attrs, kernel_h=w_shape[1], kernel_w=w_shape[2])
    x, w = f32(5, *x_shape[1:]), f32(*w_shape)
    dy = f32(*torch_conv(attrs, torch.tensor(x), torch.tensor(w)).shape)
    monkeypatch.setattr(conv2d, "COLUMN_BLOCK_BYTES", 2 * 4 * w_shape[1] * w_shape[2] * x_shape[3]
                        * dy.shape[1] * dy.shape[2])
    kernel, (dw,) = compiled("Conv2DGradFilter", [dy, x], 1, attrs)
    assert len(kernel.blocks) == 3
    kernel.run([dy, x], [dw])
    _, want_w = autograd(lambda tx, tw: torch_conv(attrs, tx, tw), dy, x, w)
    assert rel(dw, want_w) < TOL


def test_conv2d_grads_are_rerun_safe_on_new_data() -> None:
    """A bound kernel reads its inputs' current contents at every run (weights change between steps)."""
    attrs, x, w, dy = conv_case("grouped_strided")
    k_in, (dx,) = compiled("Conv2DGradInput", [dy, w, x], 1, attrs)
    k_w, (dw,) = compiled("Conv2DGradFilter", [dy, x], 1, attrs)
    for _ in range(2):
        w[...], x[...], dy[...] = f32(*w.shape), f32(*x.shape), f32(*dy.shape)
        k_in.run([dy, w, x], [dx])
        k_w.run([dy, x], [dw])
        want_x, want_w = autograd(lambda tx, tw: torch_conv(attrs, tx, tw), dy, x, w)
        assert rel(dx, want_x) < TOL and rel(dw, want_w) < TOL


@pytest.mark.parametrize("shape", [(3, 5, 4, 7), (2, 7, 7, 6), (1, 37, 1, 6), (4, 40), (5,)])
def test_bias_grad_sums_every_axis_but_the_last(shape: tuple[int, ...]) -> None:
    """Pixels that group into rows of several (5 of 7 channels, 7 of 6) and ones that do not (37 pixels, 40
    channels, a 1-D dy)."""
    dy = f32(*shape)
    (db,) = run_op("BiasGrad", [dy], 1)
    assert rel(db, dy.astype(np.float64).sum(axis=tuple(range(dy.ndim - 1)))) < TOL


# ---- pooling -------------------------------------------------------------------------------------------------
def torch_pool(attrs: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    """Pooling on NHWC x with PyTorch, NHWC out. Max pooling pads with -inf first (any pads); average pooling
    passes PyTorch its symmetric pads so count_include_pad means the same."""
    if attrs.get("global_pool"):
        pool = F.adaptive_avg_pool2d if attrs.get("mode") == fb.PoolMode.AVG else F.adaptive_max_pool2d
        return nhwc(pool(nchw(x), 1))
    kernel = (attrs["kernel_h"], attrs["kernel_w"])
    stride = (attrs.get("stride_h", 1), attrs.get("stride_w", 1))
    top, bottom, left, right = explicit_pads(attrs, x.shape[1], x.shape[2], *kernel)
    if attrs.get("mode") == fb.PoolMode.AVG:
        assert (top, left) == (bottom, right)
        return nhwc(F.avg_pool2d(nchw(x), kernel, stride, (top, left), attrs.get("ceil_mode", False),
                                 attrs.get("count_include_pad", False)))
    xp = F.pad(nchw(x), (left, right, top, bottom), value=-np.inf)
    dilation = (attrs.get("dilation_h", 1), attrs.get("dilation_w", 1))
    return nhwc(F.max_pool2d(xp, kernel, stride, 0, dilation, attrs.get("ceil_mode", False)))


MAX, AVG = fb.PoolMode.MAX, fb.PoolMode.AVG
POOL = {   # x NHWC, attributes
    "max_2x2_s2": ((2, 8, 6, 3), dict(mode=MAX, kernel_h=2, kernel_w=2, stride_h=2, stride_w=2)),
    "max_3x3_s2_p1": ((2, 9, 8, 4), dict(mode=MAX, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2, pad_top=1,
                                         pad_bottom=1, pad_left=1, pad_right=1)),
    "max_asymmetric_dilated": ((1, 11, 10, 2), dict(mode=MAX, kernel_h=2, kernel_w=3, dilation_h=2, pad_top=1,
                                                    pad_right=2)),
    "max_ceil_mode": ((2, 8, 7, 3), dict(mode=MAX, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
                                         ceil_mode=True)),
    "max_same_upper": ((1, 7, 8, 2), dict(mode=MAX, kernel_h=3, kernel_w=2, stride_h=2, stride_w=2,
                                          pad_mode=P.SAME_UPPER)),
    "avg_2x2_s2": ((2, 8, 6, 3), dict(mode=AVG, kernel_h=2, kernel_w=2, stride_h=2, stride_w=2)),
    "avg_3x3_p1_exclude_pad": ((2, 7, 6, 3), dict(mode=AVG, kernel_h=3, kernel_w=3, pad_top=1, pad_bottom=1,
                                                  pad_left=1, pad_right=1)),
    "avg_3x3_p1_include_pad": ((2, 7, 6, 3), dict(mode=AVG, kernel_h=3, kernel_w=3, pad_top=1, pad_bottom=1,
                                                  pad_left=1, pad_right=1, count_include_pad=True)),
    "avg_ceil_mode_include_pad": ((1, 8, 9, 2), dict(mode=AVG, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
                                                     pad_top=1, pad_bottom=1, pad_left=1, pad_right=1,
                                                     ceil_mode=True, count_include_pad=True)),
    "avg_ceil_mode_exclude_pad": ((1, 8, 9, 2), dict(mode=AVG, kernel_h=3, kernel_w=3, stride_h=2, stride_w=2,
                                                     pad_top=1, pad_bottom=1, pad_left=1, pad_right=1,
                                                     ceil_mode=True)),
    "global_avg": ((2, 5, 4, 6), dict(mode=AVG, global_pool=True)),
    "global_max": ((2, 5, 4, 6), dict(mode=MAX, global_pool=True)),
}


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("name", POOL)
def test_pooling_grad_matches_autograd(name: str, ties: bool) -> None:
    """Ties (small integers, as after ReLU): max pooling routes dy to the first maximum in scan order."""
    shape, attrs = POOL[name]
    x = rng.integers(-1, 2, shape).astype(np.float32) if ties else f32(*shape)
    y = torch_pool(attrs, torch.tensor(x)).numpy()
    dy = f32(*y.shape)
    (dx,) = run_op("PoolingGrad", [dy, x, y], 1, attrs)
    assert rel(dx, autograd(lambda t: torch_pool(attrs, t), dy, x)[0]) < TOL


# ---- BatchNorm: training forward and gradient ----------------------------------------------------------------
BN_LAYOUTS = {"nhwc": ((3, 5, 4, 6), 3), "nchw": ((3, 6, 5, 4), 1), "2d": ((7, 6), 1)}


def to_channel_second(x: torch.Tensor, axis: int) -> torch.Tensor:
    """The tensor with its channel axis moved to 1, as torch's batch_norm expects."""
    return x.movedim(axis, 1)


def bn_params(c: int) -> list[np.ndarray]:
    """scale, bias, running mean, running var."""
    return [f32(c, low=0.5, high=1.5), f32(c), f32(c), f32(c, low=0.5, high=2.0)]


@pytest.mark.parametrize("layout", BN_LAYOUTS)
def test_batchnorm_training_forward_matches_torch_and_updates_running_stats(layout: str) -> None:
    shape, axis = BN_LAYOUTS[layout]
    x = f32(*shape) * 3 + 1
    scale, bias, mean, var = bn_params(shape[axis])
    run_mean, run_var = torch.tensor(mean, dtype=torch.float64), torch.tensor(var, dtype=torch.float64)
    want = F.batch_norm(to_channel_second(torch.tensor(x, dtype=torch.float64), axis), run_mean, run_var,
                        torch.tensor(scale, dtype=torch.float64), torch.tensor(bias, dtype=torch.float64),
                        training=True, momentum=0.1, eps=1e-3).movedim(1, axis)
    y, saved_mean, saved_invstd = run_op("BatchNorm", [x, scale, bias, mean, var], 3,
                                         dict(training=True, momentum=0.9, epsilon=1e-3, axis=axis))
    others = tuple(i for i in range(len(shape)) if i != axis)
    x64 = x.astype(np.float64)
    assert rel(y, want) < TOL
    assert rel(saved_mean, x64.mean(axis=others)) < TOL
    assert rel(saved_invstd, 1 / np.sqrt(x64.var(axis=others) + 1e-3)) < TOL
    assert rel(mean, run_mean) < TOL and rel(var, run_var) < TOL


def test_batchnorm_training_is_never_folded() -> None:
    x, params = f32(4, 3), bn_params(3)
    node = node_of("BatchNorm", 5, 3, dict(training=True))
    _, kernel = fold_or_infer(node, [TensorSpec(a.shape, a.dtype, a) for a in [x, *params]])
    assert kernel is not None and not kernel.foldable


def test_batchnorm_training_refuses_one_value_per_channel() -> None:
    with pytest.raises(InferShapeError, match="more than one value per channel"):
        run_op("BatchNorm", [f32(1, 1, 1, 3), *bn_params(3)], 3, dict(training=True, axis=3))


def test_batchnorm_training_refuses_read_only_running_stats() -> None:
    params = bn_params(3)
    params[3].flags.writeable = False
    with pytest.raises(NotSupportedError, match="writable"):
        run_op("BatchNorm", [f32(4, 3), *params], 3, dict(training=True))


@pytest.mark.parametrize("layout", BN_LAYOUTS)
def test_batchnorm_grad_matches_autograd(layout: str) -> None:
    shape, axis = BN_LAYOUTS[layout]
    x, dy = f32(*shape) * 3 + 1, f32(*shape)
    scale, bias, _, _ = bn_params(shape[axis])
    others = tuple(i for i in range(len(shape)) if i != axis)
    x64 = x.astype(np.float64)
    saved_mean = x64.mean(axis=others).astype(np.float32)
    saved_invstd = (1 / np.sqrt(x64.var(axis=others) + 1e-5)).astype(np.float32)
    dx, dscale, dbias = run_op("BatchNormGrad", [dy, x, scale, saved_mean, saved_invstd], 3, dict(axis=axis))

    def bn(tx: torch.Tensor, ts: torch.Tensor, tb: torch.Tensor) -> torch.Tensor:
        return F.batch_norm(to_channel_second(tx, axis), None, None, ts, tb, training=True).movedim(1, axis)
    want = autograd(bn, dy, x, scale, bias)
    assert rel(dx, want[0]) < TOL and rel(dscale, want[1]) < TOL and rel(dbias, want[2]) < TOL


# ---- Dropout -------------------------------------------------------------------------------------------------
def test_dropout_inference_is_the_identity() -> None:
    x = f32(3, 4)
    (y,) = run_op("Dropout", [x], 1, dict(ratio=0.5))
    np.testing.assert_array_equal(y, x)


@pytest.mark.parametrize("ratio", [0.2, 0.5, 0.8])
def test_dropout_training_mask_is_bernoulli_scaled_by_the_keep_probability(ratio: float) -> None:
    x = f32(200, 500)
    y, mask = run_op("Dropout", [x], 2, dict(ratio=ratio, training=True))
    kept = mask != 0
    assert abs(kept.mean() - (1 - ratio)) < 5 * np.sqrt(ratio * (1 - ratio) / mask.size)
    np.testing.assert_allclose(mask[kept], 1 / (1 - ratio), rtol=1e-6)
    np.testing.assert_array_equal(y, x * mask)


@pytest.mark.parametrize("ratio, kept", [(0.0, 1.0), (1.0, 0.0)])
def test_dropout_training_extreme_ratios(ratio: float, kept: float) -> None:
    x = f32(10, 10)
    y, mask = run_op("Dropout", [x], 2, dict(ratio=ratio, training=True))
    np.testing.assert_array_equal(mask, kept)
    np.testing.assert_array_equal(y, x * kept)


def test_dropout_training_draws_from_the_generator_the_session_sets() -> None:
    x = f32(8, 16)
    kernel, outputs = compiled("Dropout", [x], 2, dict(training=True))
    masks = []
    for seed in (1, 1, 2):
        kernel.rng = np.random.default_rng(seed)
        kernel.run([x], outputs)
        masks.append(outputs[1].copy())
    assert np.array_equal(masks[0], masks[1]) and not np.array_equal(masks[0], masks[2])


def test_dropout_training_is_never_folded() -> None:
    x = f32(3, 4)
    node = node_of("Dropout", 1, 2, dict(training=True))
    assert fold_or_infer(node, [TensorSpec(x.shape, x.dtype, x)])[1] is not None


def test_dropout_grad_multiplies_by_the_mask() -> None:
    x, dy = f32(6, 7), f32(6, 7)
    _, mask = run_op("Dropout", [x], 2, dict(ratio=0.4, training=True))
    (dx,) = run_op("DropoutGrad", [dy, mask], 1, dict(ratio=0.4))
    np.testing.assert_array_equal(dx, dy * mask)


# ---- dense: FullConnection, MatMul ---------------------------------------------------------------------------
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_full_connection_grad_matches_autograd(with_bias: bool) -> None:
    x, w, b = f32(2, 3, 5), f32(4, 5), f32(4)
    dy = f32(2, 3, 4)
    grads = run_op("FullConnectionGrad", [dy, x, w], 3 if with_bias else 2)
    want = autograd(F.linear, dy, x, w, b)
    assert all(rel(g, t) < TOL for g, t in zip(grads, want))


MATMUL = [((3, 4), (4, 5), False, False), ((2, 3, 4), (4, 5), False, False), ((2, 3, 4), (1, 4, 5), False, False),
          ((4,), (2, 4, 5), False, False), ((2, 3, 4), (4,), False, False), ((4,), (4,), False, False),
          ((2, 1, 3, 4), (5, 4, 6), False, False), ((2, 4, 3), (4, 5), True, False),
          ((2, 3, 4), (5, 4), False, True), ((3, 2, 4, 3), (2, 5, 4), True, True), ((4, 3), (2, 4, 5), True, False)]


@pytest.mark.parametrize("sa, sb, ta, tb", MATMUL, ids=str)
def test_matmul_grad_matches_autograd_with_broadcast_and_transposes(sa, sb, ta: bool, tb: bool) -> None:
    a, b = f32(*sa), f32(*sb)

    def mm(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x.mT if ta else x, y.mT if tb else y)
    dy = f32(*mm(torch.tensor(a), torch.tensor(b)).shape)
    da, db = run_op("MatMulGrad", [dy, a, b], 2, dict(transpose_a=ta, transpose_b=tb))
    want_a, want_b = autograd(mm, dy, a, b)
    assert rel(da, want_a) < TOL and rel(db, want_b) < TOL


# ---- LayerNorm: statistics outputs and gradient --------------------------------------------------------------
LAYER_NORM = {"last_axis": ((4, 6, 8), -1, (8,)), "two_axes": ((3, 4, 5), 1, (4, 5)),
              "broadcast_scale": ((2, 3, 4, 5), 1, (5,))}


@pytest.mark.parametrize("name", LAYER_NORM)
def test_layer_norm_outputs_mean_and_invstd(name: str) -> None:
    shape, axis, param_shape = LAYER_NORM[name]
    x, scale, bias = f32(*shape) * 2 + 1, f32(*param_shape), f32(*param_shape)
    y, mean, invstd = run_op("LayerNorm", [x, scale, bias], 3, dict(axis=axis, epsilon=1e-4))
    inner = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    want_mean = x64.mean(axis=inner, keepdims=True)
    want_invstd = 1 / np.sqrt(x64.var(axis=inner, keepdims=True) + 1e-4)
    assert rel(mean, want_mean) < TOL and rel(invstd, want_invstd) < TOL
    assert rel(y, (x64 - want_mean) * want_invstd * scale + bias) < TOL


@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("name", LAYER_NORM)
def test_layer_norm_grad_matches_autograd(name: str, with_bias: bool) -> None:
    shape, axis, param_shape = LAYER_NORM[name]
    x, scale, bias, dy = f32(*shape) * 2 + 1, f32(*param_shape), f32(*param_shape), f32(*shape)
    inner = shape[axis % len(shape):]
    _, mean, invstd = run_op("LayerNorm", [x, scale, bias], 3, dict(axis=axis))
    grads = run_op("LayerNormGrad", [dy, x, scale, mean, invstd], 3 if with_bias else 2, dict(axis=axis))

    def ln(tx: torch.Tensor, ts: torch.Tensor, tb: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(tx, inner, eps=1e-5) * ts + tb
    want = autograd(ln, dy, x, scale, bias)
    assert all(rel(g, t) < TOL for g, t in zip(grads, want))


# ---- LRN, Softmax, LogSoftmax --------------------------------------------------------------------------------
def onnx_lrn(x: torch.Tensor, size: int, alpha: float, beta: float, bias: float) -> torch.Tensor:
    """ONNX LRN on NCHW in torch ops: the window of channel c is [c - (size-1)//2, c + size//2]."""
    squares = F.pad(x * x, (0, 0, 0, 0, (size - 1) // 2, size // 2))
    window = sum(squares[:, k:k + x.shape[1]] for k in range(size))
    return x / (bias + alpha / size * window) ** beta


@pytest.mark.parametrize("size", [1, 3, 5, 4])
def test_lrn_grad_matches_autograd(size: int) -> None:
    """Odd sizes against F.local_response_norm; even sizes (whose window PyTorch centres differently) against
    ONNX's definition written in torch ops."""
    alpha, beta, bias = 0.3, 0.75, 1.5
    x, dy = f32(2, 4, 3, 7), f32(2, 4, 3, 7)
    lrn = F.local_response_norm if size % 2 else onnx_lrn

    def fn(t: torch.Tensor) -> torch.Tensor:
        return nhwc(lrn(nchw(t), size, alpha, beta, bias))
    y = fn(torch.tensor(x)).numpy()
    (dx,) = run_op("LRNGrad", [dy, x, y], 1, dict(size=size, alpha=alpha, beta=beta, bias=bias))
    assert rel(dx, autograd(fn, dy, x)[0]) < TOL


@pytest.mark.parametrize("op, fn", [("SoftmaxGrad", torch.softmax), ("LogSoftmaxGrad", torch.log_softmax)])
@pytest.mark.parametrize("shape, axis", [((4, 10), -1), ((2, 5, 3, 4), 1), ((3, 4, 6), 2)], ids=str)
def test_softmax_grads_match_autograd(op: str, fn: Callable, shape: tuple[int, ...], axis: int) -> None:
    x, dy = f32(*shape) * 3, f32(*shape)
    y = fn(torch.tensor(x), axis).numpy()
    (dx,) = run_op(op, [dy, y], 1, dict(axis=axis))
    assert rel(dx, autograd(lambda t: fn(t, axis), dy, x)[0]) < TOL
