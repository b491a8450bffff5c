"""The compiled kernels (lite/kernels/compiled) against the numpy reference and onnxruntime: every changed kernel
runs on both paths; float32 agrees within rounding, int8 bit for bit. Also: kernel selection, the OpenMP workers'
bounded spinning, and `lite` without numba."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import lite
from converter import convert
from lite import threads
from lite.kernel import ENV, selection
from lite.kernels import compiled, conv2d
from lite.kernels.compiled import conv2d as compiled_conv2d
from lite.kernels.compiled import epilogue
from schema import fb
from tests.lite.kernels.grad import test_basic as basic_tests
from tests.lite.kernels.grad import test_nn as grad_tests
from tests.lite.kernels.int8 import test_kernels as int8_tests
from tests.lite.kernels import test_nn as nn_tests
from tests.lite.kernels import test_recurrent as recurrent_tests
from tests.lite.kernels.grad import test_recurrent as recurrent_grad_tests
from tests.lite.kernels.test_nn import CONV_CASES, _array, node_model
from tests.util import REPO, run_lite, run_ort, small_cnn

A = fb.ActivationType
HAVE_NUMBA = importlib.util.find_spec("numba") is not None
PATHS = ["numpy", pytest.param("compiled", marks=pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed"))]
DIRECT = [c for c in CONV_CASES if c.startswith(("depthwise", "dense"))] + ["pointwise", "pads"]


def compiled_nodes(s: lite.LiteSession) -> list[str]:
    return [step.node.op for step in s._plan.steps if step.kernel.compiled]


def flag(kernel: object, name: str) -> bool:
    """A path flag of a compiled sibling (`fused_gemm`, `gathered`, ...); False on a numpy kernel, which has none."""
    return bool(getattr(kernel, name, False))


def session(model: onnx.ModelProto, kernels: str, threads: int = 1) -> lite.LiteSession:
    buf = convert(model)
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context(thread_num=threads, kernels=kernels))


def conv_relu6(case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv + bias + Clip(0, 6), which the converter fuses into one Conv2D with a RELU6 activation."""
    x_shape, w_shape, attrs = CONV_CASES[case]
    feeds = {"x": _array(x_shape) * 3}
    conv = node_model("Conv", feeds, {"w": _array(w_shape), "b": _array(w_shape[:1])}, ["x", "w", "b"], **attrs)
    graph = conv.graph
    graph.node.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
    graph.initializer.extend([numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")])
    graph.output[0].name = "z"
    return conv, feeds


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case", DIRECT)
def test_conv_with_fused_relu6_matches_onnxruntime(case: str, kernels: str) -> None:
    model, feeds = conv_relu6(case)
    want = run_ort(model, feeds)["z"]
    got = run_lite(session(model, kernels), feeds)["z"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case", ["one_channel_5x5", "two_channels_strided_padded", "one_channel_dilated"])
def test_narrow_conv_columns_match_onnxruntime_on_both_paths(case: str, kernels: str) -> None:
    """Window rows under 8 floats: the columns are built tap by tap."""
    x_shape, w_shape, attrs = CONV_CASES[case]
    feeds = {"x": _array(x_shape)}
    model = node_model("Conv", feeds, {"w": _array(w_shape), "b": _array(w_shape[:1])}, ["x", "w", "b"], **attrs)
    s = session(model, kernels)
    assert [step.kernel.narrow for step in s._plan.steps if step.node.op == "Conv2D"] == [True]
    np.testing.assert_allclose(run_lite(s, feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernels", PATHS)
def test_narrow_conv_columns_in_blocks_of_images_match_onnxruntime(kernels: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Tap-built columns go one run of images at a time (`COLUMN_BLOCK_BYTES`): here 2 of 5 images per block,
    the last block shorter."""
    x_shape, w_shape, attrs = CONV_CASES["one_channel_5x5"]
    x_shape = (5, *x_shape[1:])
    out_pixels = (x_shape[2] - w_shape[2] + 1) * (x_shape[3] - w_shape[3] + 1)
    monkeypatch.setattr(conv2d, "COLUMN_BLOCK_BYTES", 2 * 4 * w_shape[1] * w_shape[2] * w_shape[3] * out_pixels)
    feeds = {"x": _array(x_shape)}
    model = node_model("Conv", feeds, {"w": _array(w_shape), "b": _array(w_shape[:1])}, ["x", "w", "b"], **attrs)
    s = session(model, kernels)
    [conv] = [step.kernel for step in s._plan.steps if step.node.op == "Conv2D"]
    assert conv.narrow and len(conv.compute.blocks) == 3
    np.testing.assert_allclose(run_lite(s, feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op", ["Sigmoid", "HardSwish"])
@pytest.mark.parametrize("case", ["depthwise_stride2", "dense_first_layer_stride2", "pointwise"])
def test_conv_with_a_fused_activation_that_is_no_clamp(case: str, op: str, kernels: str) -> None:
    """Direct (depthwise, dense tiles) and GEMM paths; inputs past +-3, where the hard-swish gate saturates."""
    x_shape, w_shape, attrs = CONV_CASES[case]
    feeds = {"x": _array(x_shape) * 4}
    model = node_model("Conv", feeds, {"w": _array(w_shape)}, ["x", "w"], opset=14, **attrs)
    model.graph.node.append(helper.make_node(op, ["y"], ["z"]))
    model.graph.output[0].name = "z"
    s = session(model, kernels)
    assert [step.node.op for step in s._plan.steps].count("Conv2D") == 1     # the activation is fused
    np.testing.assert_allclose(run_lite(s, feeds)["z"], run_ort(model, feeds)["z"], rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("shape", [(37, 6), (2, 9, 7, 16), (1, 64, 64, 16)])
def test_compiled_hard_swish_pass_matches_the_formula_and_others_keep_numpy(shape: tuple) -> None:
    out = np.empty(shape, np.float32)
    calls = []
    numpy_pass = epilogue.activation(out, A.SIGMOID, lambda x, y: calls.append((x, y)))
    numpy_pass()
    assert calls == [(out, out)]
    finish = epilogue.activation(out, A.HSWISH, lambda x, y: calls.append((x, y)))
    assert isinstance(finish, compiled.Bound)
    out[...] = before = grad_tests.f32(*shape) * 8
    finish()
    np.testing.assert_allclose(out, before * np.clip(before / 6 + 0.5, 0, 1), rtol=1e-6, atol=1e-7)
    assert len(calls) == 1


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("pixels, channels", [(288, 6), (37, 6), (40, 3), (7, 40)])
@pytest.mark.parametrize("kind", [A.NO_ACTIVATION, A.RELU6])
@pytest.mark.parametrize("with_bias", [True, False])
def test_compiled_epilogue_over_rows_of_pixels_reads_the_bias_at_every_run(pixels: int, channels: int, kind: int,
                                                                           with_bias: bool) -> None:
    """Few channels: the epilogue runs over rows of several pixels with a tiled bias (37 pixels: no such row
    divides them), refreshed at every run as a trained bias changes."""
    out = np.empty((pixels, channels), np.float32)
    bias = (grad_tests.f32(channels) if with_bias else None)
    if not with_bias and kind == A.NO_ACTIVATION:
        assert epilogue.epilogue(out, bias, kind) is None
        return
    finish = epilogue.epilogue(out, bias, kind)
    assert isinstance(finish, compiled.Bound)
    for _ in range(2):
        if bias is not None:
            bias[...] = grad_tests.f32(channels)
        out[...] = before = grad_tests.f32(pixels, channels) * 4
        finish()
        want = before + (0 if bias is None else bias)
        np.testing.assert_array_equal(out, np.clip(want, 0, 6) if kind == A.RELU6 else want)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op, slope", [("Relu", None), ("Clip", None), ("PRelu", (6,)), ("PRelu", (1,))])
@pytest.mark.parametrize("overwrites", [False, True])
def test_clamps_and_prelu_match_onnxruntime_in_place_or_not(op: str, slope: tuple | None, overwrites: bool,
                                                            kernels: str) -> None:
    """x (or -x, whose memory the op may take) -> op -> y; the compiled path takes clamps and a slope of one value
    per last-axis channel."""
    feeds = {"x": _array((2, 4, 5, 6)) * 8}
    consts = {"lo": np.float32(0), "hi": np.float32(6)} if op == "Clip" else {}
    if slope:
        consts["slope"] = np.abs(_array(slope))
    source = "s" if overwrites else "x"
    nodes = [helper.make_node("Neg", ["x"], ["s"])] * overwrites + [
        helper.make_node(op, [source, *consts], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4, 5, 6])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    sess = session(model, kernels)
    [kernel] = [step.kernel for step in sess._plan.steps if step.node.op in ("Activation", "PReLU")]
    assert kernel.compiled == (kernels == "compiled")
    np.testing.assert_allclose(run_lite(sess, feeds)["y"], run_ort(model, feeds)["y"], rtol=1e-6)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("case", DIRECT)
def test_compiled_and_numpy_conv_agree_within_rounding(case: str) -> None:
    model, feeds = conv_relu6(case)
    reference = run_lite(session(model, "numpy"), feeds)["z"]
    fast = run_lite(session(model, "compiled"), feeds)["z"]
    np.testing.assert_allclose(fast, reference, rtol=2e-6, atol=2e-6 * float(np.abs(reference).max()))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("case, tiled", [("depthwise", True), ("depthwise_24ch_dilated_strided", True),
                                         ("dense_first_layer_stride2", True), ("dense_first_layer_dilated", None),
                                         ("depthwise_stride2", True), ("depthwise_63ch_strided", True),
                                         ("depthwise_multiplier2", False), ("pads", None)])
def test_register_tiles_take_depthwise_and_first_layer_convs(case: str, tiled: bool | None) -> None:
    """Depthwise convs of multiplier 1 (any number of channels: 6 = 4 + 2, 63 = 32 + 16 + 8 + 4 + 2 + 1 on
    AVX-512) and dense convs of few input channels with output channels a multiple of 8 run as register tiles;
    other depthwise convs on the generic kernel; other dense convs (None) on the GEMM, also those of few channels
    whose kernel rows reach GATHER_RUN floats (4 channels x 5 columns: read in place)."""
    model, _ = conv_relu6(case)
    [conv] = [step.kernel for step in session(model, "compiled")._plan.steps if step.node.op == "Conv2D"]
    assert getattr(conv.compute, "tiled", None) is tiled


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case, threads, numpy_winograd, compiled_winograd", [
    ("winograd_3x3", 1, True, True), ("winograd_3x3_odd_unpadded", 1, True, True),
    ("winograd_too_few_tiles", 1, False, False), ("winograd_3x3", 2, False, True)])
def test_winograd_takes_3x3_convs_with_enough_tiles(case: str, threads: int, numpy_winograd: bool,
                                                    compiled_winograd: bool, kernels: str) -> None:
    """numpy's F(2x2) in one-thread sessions from 32 2x2 tiles, the compiled F(4x4) at any thread count from 8
    4x4 tiles (winograd_too_few_tiles has 16 and 4)."""
    x_shape, w_shape, attrs = CONV_CASES[case]
    feeds = {"x": _array(x_shape)}
    model = node_model("Conv", feeds, {"w": _array(w_shape), "b": _array(w_shape[:1])}, ["x", "w", "b"], **attrs)
    s = session(model, kernels, threads)
    [conv] = [step.kernel for step in s._plan.steps if step.node.op == "Conv2D"]
    assert (conv.winograd, flag(conv, "winograd_fused")) == ((numpy_winograd, False) if kernels == "numpy"
                                                                       else (False, compiled_winograd))
    want = run_ort(model, feeds)["y"]
    got = run_lite(s, feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=winograd_atol(conv, want))


def winograd_atol(conv, scale: np.ndarray) -> float:
    """1e-4, or 1e-5 of the largest |value| of `scale` (the conv's output before its activation) on the compiled
    F(4x4): its transforms scale values by up to 5 and 8, so its rounding grows with the output's range."""
    return 1e-5 * float(np.abs(scale).max()) if flag(conv, "winograd_fused") else 1e-4


WINOGRAD_F4 = {   # input [N, C, H, W], output channels, ONNX pads [top, left, bottom, right]
    "whole_tiles": ((2, 16, 8, 8), 32, [1, 1, 1, 1]),
    "partial_tiles_odd_channels": ((3, 17, 11, 13), 70, [1, 1, 1, 1]),    # 17: a masked tail of lanes; 70 > PANEL
    "asymmetric_pads": ((1, 24, 14, 9), 20, [0, 2, 1, 0]),
    "unpadded": ((1, 32, 10, 18), 48, [0, 0, 0, 0]),
    "wide_image_many_tasks": ((1, 20, 9, 61), 24, [1, 1, 1, 1]),
    "deep_channels": ((2, 160, 7, 7), 136, [1, 1, 1, 1]),                 # DEPTH_BLOCK and PANEL both split
}


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", WINOGRAD_F4)
def test_compiled_winograd_f4_matches_onnxruntime(case: str, threads: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Conv + bias + Clip(0, 6) on the compiled F(4x4, 3x3): tiles over every edge, channel counts that are no
    whole number of vectors or panels, one and two threads, within float32 rounding of onnxruntime (the kernel
    taken also below COMPILED_WINOGRAD_TILES: small images cover every edge case)."""
    monkeypatch.setattr(compiled_conv2d, "COMPILED_WINOGRAD_TILES", 1)
    x_shape, out_channels, pads = WINOGRAD_F4[case]
    feeds = {"x": _array(x_shape) * 3}
    w = _array((out_channels, x_shape[1], 3, 3)) / np.sqrt(9 * x_shape[1])
    model = node_model("Conv", feeds, {"w": w.astype(np.float32), "b": _array((out_channels,))}, ["x", "w", "b"],
                       pads=pads)
    before_clip = run_ort(model, feeds)["y"]
    model.graph.node.append(helper.make_node("Clip", ["y", "lo", "hi"], ["z"]))
    model.graph.initializer.extend([numpy_helper.from_array(np.float32(0), "lo"),
                                    numpy_helper.from_array(np.float32(6), "hi")])
    model.graph.output[0].name = "z"
    s = session(model, "compiled", threads)
    [conv] = [step.kernel for step in s._plan.steps if step.node.op == "Conv2D"]
    assert flag(conv, "winograd_fused") and conv.attrs.activation == A.RELU6
    np.testing.assert_allclose(run_lite(s, feeds)["z"], run_ort(model, feeds)["z"], rtol=0,
                               atol=winograd_atol(conv, before_clip))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_context_and_environment_pick_the_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    model, feeds = conv_relu6("depthwise")
    assert compiled_nodes(session(model, "compiled")) == ["Conv2D"]
    assert compiled_nodes(session(model, "numpy")) == []
    monkeypatch.setenv(ENV, "numpy")
    assert compiled_nodes(session(model, "compiled")) == []


def test_unknown_kernel_family_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(lite.ParamInvalidError, match="kernels must be one of"):
        lite.LiteSession(lite.Context(kernels="fast"))
    monkeypatch.setenv(ENV, "gpu")
    with pytest.raises(lite.ParamInvalidError, match="kernels must be one of"):
        session(conv_relu6("depthwise")[0], "auto")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_openmp_runtime_of_a_threaded_run_spins_briefly_and_then_sleeps() -> None:
    """After a two-thread compiled run, the OpenMP runtime that numba loaded reports (`omp_display_env`) the
    passive wait policy and the bounded spin count, so its workers sleep soon after a run instead of taking the
    cores BLAS runs on next. In a fresh interpreter: another package's OpenMP runtime must not load first."""
    code = ("import ctypes, numpy as np, lite\n"
            "from converter import convert\n"
            "from tests.util import small_cnn\n"
            "buf = convert(small_cnn())\n"
            "s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels='compiled', thread_num=2))\n"
            "s.RunGraph()\n"
            "libs = sorted({line.split()[-1] for line in open('/proc/self/maps') if 'libgomp' in line})\n"
            "runtimes = [lib for lib in map(ctypes.CDLL, libs) if hasattr(lib, 'omp_display_env')]\n"
            "for lib in runtimes: lib.omp_display_env(1)\n"
            "print(len(runtimes))")
    if not os.path.exists("/proc/self/maps"):
        pytest.skip("needs /proc/self/maps to find the OpenMP runtime")
    clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", ENV)}
    result = subprocess.run([sys.executable, "-c", code], env=clean, cwd=REPO, capture_output=True, text=True,
                            check=True)
    if result.stdout.split() != ["1"]:
        pytest.skip("numba's threading layer is not GNU OpenMP with omp_display_env")
    settings = dict(line.strip().replace("'", "").split(" = ") for line in result.stderr.splitlines()
                    if " = " in line)
    assert (settings["OMP_WAIT_POLICY"], settings["GOMP_SPINCOUNT"]) == ("PASSIVE", str(compiled.SPIN_COUNT))


def test_lite_runs_without_numba(tmp_path) -> None:
    """With numba unimportable (and no ahead-of-time library in its cache), `lite` imports, "auto" runs the numpy
    kernels and matches onnxruntime; forcing "compiled" is a named error."""
    script = (
        "import sys; sys.modules['numba'] = None\n"
        "import numpy as np, lite\n"
        "from converter import convert\n"
        "from tests.util import small_cnn, run_lite, run_ort\n"
        "model = small_cnn(); x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)\n"
        "buf = convert(model)\n"
        "s = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())\n"
        "got, want = run_lite(s, {'input': x}), run_ort(model, {'input': x})\n"
        "assert all(np.allclose(got[k], want[k], atol=1e-5) for k in want)\n"
        "assert not any(st.kernel.compiled for st in s._plan.steps)\n"
        "try:\n"
        "    lite.LiteSession.CreateSession(buf, len(buf), lite.Context(kernels='compiled'))\n"
        "except lite.NotSupportedError as e:\n"
        "    print('refused:', e)\n")
    env = {k: v for k, v in os.environ.items() if k != ENV and k != "MSLITE_AOT_DIR"}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env={**env, "XDG_CACHE_HOME": str(tmp_path)},
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "refused: compiled kernels were requested" in result.stdout



@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_session_creation_reports_the_compiled_kernels_start_up(tmp_path) -> None:
    """In a fresh process the first compiled session counts numba's start-up and its kernel loads in
    `jit_seconds`, a numpy session counts nothing, and neither imports scipy (once half of numba's start-up)."""
    path = tmp_path / "cnn.ms"
    path.write_bytes(convert(small_cnn()))
    script = (
        "import sys, lite\n"
        f"model = lite.Model.Load({str(path)!r})\n"
        "plain = lite.LiteSession(lite.Context(kernels='numpy')); plain.CompileGraph(model)\n"
        "fast = lite.LiteSession(lite.Context(kernels='compiled')); fast.CompileGraph(model)\n"
        "assert any(step.kernel.compiled for step in fast._plan.steps)\n"
        "print(plain.jit_seconds, fast.jit_seconds, 'scipy' in sys.modules)\n")
    env = {k: v for k, v in os.environ.items() if k != ENV}
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    plain, fast, scipy_imported = result.stdout.split()
    assert float(plain) == 0.0 and float(fast) > 0.0
    assert scipy_imported == "False"

INT8_CONV_CASES = int8_tests.CONV_CASES + [
    (2, 9, 8, 4, 8, 3, 2, 1, 4, 8, True, A.RELU6),           # depthwise, channel multiplier 2, strided
    (1, 6, 7, 5, 5, 5, 1, 2, 5, 8, False, A.RELU),           # depthwise 5x5, per-tensor weight
    (2, 9, 11, 24, 24, 3, 1, 1, 24, 8, True, A.RELU6),       # depthwise register tiles: 16 + 8 channels
    (1, 10, 13, 32, 32, 5, 2, 2, 32, 8, True, A.NO_ACTIVATION),  # tiles, 5x5 strided
    (1, 3, 2, 16, 16, 3, 1, 1, 16, 7, False, A.RELU),        # tiles: every pixel an edge pixel
    (2, 11, 9, 3, 16, 3, 2, 1, 1, 8, True, A.RELU6),         # dense register tiles: a stem-like first layer
    (1, 7, 8, 2, 24, 5, 1, 2, 1, 8, False, A.NO_ACTIVATION),  # dense tiles, 16 + 8 output channels
]


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case", INT8_CONV_CASES)
def test_int8_conv_matches_integer_reference_bit_for_bit(case: tuple, kernels: str) -> None:
    with selection(kernels):
        int8_tests.test_conv2d_matches_integer_reference(case)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case", int8_tests.ONNXRUNTIME_CONVS)
def test_int8_conv_rounds_as_onnxruntime_on_both_paths(case: tuple, kernels: str) -> None:
    """onnxruntime's rule in the GEMM epilogue (dense), the direct depthwise kernel and the numpy passes."""
    with selection(kernels):
        int8_tests.test_conv2d_rounds_as_onnxruntime(case)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_int8_register_tiles_round_as_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    """The depthwise (16 and 32 + 8 channels) and stem-like cases of onnxruntime's rule run as register tiles
    (float32 multiplier, the bias in the initial sums), not the generic kernels, and round as MLAS does."""
    from lite.kernels.compiled.int8_conv2d import Conv2DInt8Compiled
    from lite.kernels.int8.requantize import ONNXRUNTIME
    tiled, bind = [], Conv2DInt8Compiled.bind_direct
    monkeypatch.setattr(Conv2DInt8Compiled, "bind_direct", lambda self, *a: (
        tiled.append(self.tiled) if self.node.rounding == ONNXRUNTIME else None, bind(self, *a)))
    cases = [c for c in int8_tests.ONNXRUNTIME_CONVS if c[3] % 8 == 0 and c[8] == c[3] or c[3] <= 4 and c[8] == 1]
    with selection("compiled"):
        for case in cases:
            int8_tests.test_conv2d_rounds_as_onnxruntime(case)
    assert len(cases) == 3 and tiled == [True] * 3


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("case", nn_tests.POOL_CASES)
def test_pooling_matches_onnxruntime_on_both_paths(case: str, kernels: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, kernels)
    nn_tests.test_max_pool(case)
    for include_pad in (0, 1):
        nn_tests.test_average_pool(case, include_pad)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_compiled_and_numpy_pooling_agree_within_rounding(op: str) -> None:
    feeds = {"x": _array((2, 5, 13, 11))}
    model = node_model(op, feeds, {}, ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1)
    fast, reference = (run_lite(session(model, k), feeds)["y"] for k in ("compiled", "numpy"))
    assert compiled_nodes(session(model, "compiled")) == ["Pooling"]
    np.testing.assert_allclose(fast, reference, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pooling_matches_onnxruntime_on_both_paths(op: str, kernels: str) -> None:
    """Global pooling with a ReLU fused: compiled, threaded, in runs of GLOBAL_POOL_CHANNELS channels (150: a
    short last run) over 3 images, or numpy's reduction. A NaN input gives NaN on both paths, as numpy's max and
    ONNX's reference do (onnxruntime's max skips it)."""
    feeds = {"x": _array((3, 150, 13, 14))}
    feeds["x"][1, 7, 2, 3] = np.nan
    model = node_model(op, feeds, {}, ["x"])
    model.graph.node.append(helper.make_node("Relu", ["y"], ["act"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("act", onnx.TensorProto.FLOAT, None))
    s = session(model, kernels, threads=2)
    assert compiled_nodes(s) == (["Pooling"] if kernels == "compiled" else [])
    got, want = run_lite(s, feeds)["act"], run_ort(model, feeds)["act"]
    assert np.isnan(got[1, 7]).all() and np.isnan(got).sum() == 1
    got[1, 7] = want[1, 7]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("name", [c for c in grad_tests.CONV if c.startswith("depthwise")])
def test_depthwise_conv_grads_match_autograd_on_both_paths(name: str, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_conv2d_grad_input_matches_autograd(name)
        grad_tests.test_conv2d_grad_filter_matches_autograd(name)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("name", ["depthwise_stride2", "strided_asymmetric"])
def test_compiled_conv_grads_read_new_weights_and_data_at_every_run(name: str) -> None:
    attrs, x, w, dy = grad_tests.conv_case(name)
    with selection("compiled"):
        k_in, (dx,) = grad_tests.compiled("Conv2DGradInput", [dy, w, x], 1, attrs)
        k_w, (dw,) = grad_tests.compiled("Conv2DGradFilter", [dy, x], 1, attrs)
    assert k_in.compiled and k_w.compiled == name.startswith("depthwise")
    for _ in range(2):
        w[...], x[...], dy[...] = (grad_tests.f32(*a.shape) for a in (w, x, dy))
        k_in.run([dy, w, x], [dx])
        k_w.run([dy, x], [dw])
        want_x, want_w = grad_tests.autograd(lambda tx, tw: grad_tests.torch_conv(attrs, tx, tw), dy, x, w)
        assert grad_tests.rel(dx, want_x) < grad_tests.TOL and grad_tests.rel(dw, want_w) < grad_tests.TOL


DENSE_CONV = [c for c in grad_tests.CONV if not c.startswith("depthwise")]
CLIPS = ["relu", "relu6", "hard_tanh"]


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("name", DENSE_CONV)
def test_dense_conv_input_grad_matches_autograd_on_both_paths(name: str, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_conv2d_grad_input_matches_autograd(name)
        attrs, x, w, dy = grad_tests.conv_case(name)
        kernel, _ = grad_tests.compiled("Conv2DGradInput", [dy, w, x], 1, attrs)
    columns = attrs.get("group", 1) == 1 and x.shape[3] < 8 and name != "pointwise"   # (1x1 stride 1: one GEMM)
    assert kernel.compiled == (kernels == "compiled" and columns)
    assert flag(kernel, "pixel_rows") == (kernel.compiled and w.shape[2] * x.shape[3] >= 8)  # im2col rows


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("name", ["dense_3x3_pad1", "dense_wide_3x3", "strided_asymmetric", "dilated_wide"])
def test_compiled_dense_conv_input_grad_in_blocks_of_images_matches_autograd(name: str,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """dx block by block of images (2 of 5 here, the last 1): each block's columns, then its col2im."""
    x_shape, w_shape, attrs = grad_tests.CONV[name]
    attrs = dict(attrs, kernel_h=w_shape[1], kernel_w=w_shape[2])
    x, w = grad_tests.f32(5, *x_shape[1:]), grad_tests.f32(*w_shape)
    dy = grad_tests.f32(*grad_tests.torch_conv(attrs, grad_tests.torch.tensor(x), grad_tests.torch.tensor(w)).shape)
    monkeypatch.setattr(conv2d, "COLUMN_BLOCK_BYTES", 2 * 4 * w_shape[1] * w_shape[2] * x_shape[3]
                        * dy.shape[1] * dy.shape[2])
    with selection("compiled"):
        kernel, (dx,) = grad_tests.compiled("Conv2DGradInput", [dy, w, x], 1, attrs)
    assert flag(kernel, "pixel_rows") and len(kernel.blocks) == 3
    kernel.run([dy, w, x], [dx])
    want_x, _ = grad_tests.autograd(lambda tx, tw: grad_tests.torch_conv(attrs, tx, tw), dy, x, w)
    assert grad_tests.rel(dx, want_x) < grad_tests.TOL


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("name", DENSE_CONV)
def test_dense_conv_filter_grad_matches_autograd_on_both_paths(name: str, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_conv2d_grad_filter_matches_autograd(name)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("name", grad_tests.POOL)
def test_pooling_grad_matches_autograd_on_both_paths(name: str, ties: bool, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_pooling_grad_matches_autograd(name, ties)
        shape, attrs = grad_tests.POOL[name]
        x = grad_tests.f32(*shape)
        y = grad_tests.torch_pool(attrs, grad_tests.torch.tensor(x)).numpy()
        kernel, _ = grad_tests.compiled("PoolingGrad", [y, x, y], 1, attrs)
    assert kernel.compiled == (kernels == "compiled" and not attrs.get("global_pool", False))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_pooling_grad_of_strided_views_keeps_the_numpy_kernel() -> None:
    """The compiled pass reads flat arrays: a non-contiguous input leaves the numpy kernel bound."""
    shape, attrs = grad_tests.POOL["max_3x3_s2_p1"]
    x = grad_tests.f32(*shape[:3], 2 * shape[3])[..., ::2]
    y = grad_tests.torch_pool(attrs, grad_tests.torch.tensor(x)).numpy()
    dy = grad_tests.f32(*y.shape)
    with selection("compiled"):
        kernel, (dx,) = grad_tests.compiled("PoolingGrad", [dy, x, y], 1, attrs)
    kernel.run([dy, x, y], [dx])
    assert not kernel.compiled
    assert grad_tests.rel(dx, grad_tests.autograd(lambda t: grad_tests.torch_pool(attrs, t), dy, x)[0]) < grad_tests.TOL


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("layout", grad_tests.BN_LAYOUTS)
def test_batchnorm_grad_matches_autograd_on_both_paths(layout: str, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_batchnorm_grad_matches_autograd(layout)
        shape, axis = grad_tests.BN_LAYOUTS[layout]
        kernel, _ = grad_tests.compiled("BatchNormGrad", [grad_tests.f32(*shape), grad_tests.f32(*shape),
                                                          *grad_tests.bn_params(shape[axis])[:3]], 3, dict(axis=axis))
    assert kernel.compiled == (kernels == "compiled" and axis == len(shape) - 1)   # channels last


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("name", CLIPS)
def test_clip_activation_grads_match_autograd_on_both_paths(name: str, kernels: str) -> None:
    with selection(kernels):
        grad_tests.test_activation_grad_matches_autograd(name)
        grad_tests.test_activation_grad_at_the_kinks_follows_autograd(name)
        x = grad_tests.f32(3, 4)
        kernel, _ = grad_tests.compiled("ActivationGrad", [x, x], 1, grad_tests.ACTIVATIONS[name][0])
    assert kernel.compiled == (kernels == "compiled")


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_compiled_relu_grad_passes_infinity_and_blocks_nan_like_autograd() -> None:
    """x = inf passes dy; a NaN dy where x <= 0 is blocked (a select, not a product)."""
    x = np.array([-np.inf, -1.0, 0.0, 2.0, np.inf, 0.0], np.float32)
    dy = np.array([1.0, np.nan, 2.0, 3.0, 4.0, np.nan], np.float32)
    want = grad_tests.autograd(grad_tests.F.relu, dy, x)[0].numpy()
    with selection("compiled"):
        (dx,) = grad_tests.run_op("ActivationGrad", [dy, x], 1, {"type": A.RELU})
    np.testing.assert_array_equal(dx, want)


OPTIMIZER_CASES = ([("Sgd", hp) for hp in basic_tests.SGD_CASES]
                   + [("ApplyMomentum", hp) for hp in (dict(momentum=0.9), dict(momentum=0.5, use_nesterov=True,
                                                                                   weight_decay=0.01))]
                   + [("Adam", hp) for hp in (dict(), dict(beta1=0.8, beta2=0.99, epsilon=1e-6, weight_decay=0.01))])


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("op, hp", OPTIMIZER_CASES, ids=lambda v: v if isinstance(v, str) else str(v))
def test_compiled_optimizer_updates_equal_numpy_bit_for_bit(op: str, hp: dict) -> None:
    """The compiled update takes numpy's float32 steps in numpy's order (numpy's path is checked against
    torch.optim in tests/lite/kernels/grad/test_basic.py)."""
    grads = [basic_tests.f32(4, 6) for _ in range(basic_tests.STEPS)]
    w = basic_tests.f32(4, 6)
    runs = {}
    for kernels in ("numpy", "compiled"):
        with selection(kernels):
            opt = basic_tests.Optimizer(op, hp, w.copy(), basic_tests.state(op, w))
        assert opt.kernel.compiled == (kernels == "compiled")
        for g in grads:
            opt.step(g)
        runs[kernels] = (opt.w.copy(), {k: a.copy() for k, a in opt.arrays.items()})
    np.testing.assert_array_equal(runs["compiled"][0], runs["numpy"][0])
    for name, array in runs["numpy"][1].items():
        np.testing.assert_array_equal(runs["compiled"][1][name], array, err_msg=name)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_gru_and_lstm_match_onnxruntime_on_both_paths(op: str, direction: str, kernels: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, kernels)
    for layout in (0, 1):
        recurrent_tests.test_directions_layouts_and_initial_states(op, direction, layout)
    recurrent_tests.test_sequence_lens_of_mixed_lengths(op, direction)
    if op == "GRU" and direction != "reverse":
        recurrent_tests.test_gru_linear_before_reset(direction)


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_gru_and_lstm_gradients_match_autograd_on_both_paths(op: str, kernels: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled forward leaves the same saved pre-activations and states the gradient kernels read."""
    monkeypatch.setenv(ENV, kernels)
    recurrent_grad_tests.test_gradients_batchwise(op)
    recurrent_grad_tests.test_gradients_match_torch_nn(op, True)
    if op == "GRU":
        for lbr in (0, 1):
            recurrent_grad_tests.test_gru_gradients_both_reset_forms(lbr)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("op, attrs", [("GRU", {"linear_before_reset": 0}), ("GRU", {"linear_before_reset": 1}),
                                       ("LSTM", {})], ids=["gru", "gru-lbr", "lstm"])
def test_compiled_and_numpy_recurrent_loops_agree_within_rounding(op: str, attrs: dict) -> None:
    model = recurrent_tests.recurrent_model(op, "bidirectional", lens=True, initial=True, **attrs)
    feeds = recurrent_tests.feeds(lens=[5, 2, 4])
    assert compiled_nodes(session(model, "compiled")) == [op]
    fast, reference = (run_lite(session(model, k), feeds) for k in ("compiled", "numpy"))
    for name, want in reference.items():
        np.testing.assert_allclose(fast[name], want, rtol=1e-6, atol=1e-6, err_msg=name)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("op, attrs", [("GRU", {"activations": ["HardSigmoid", "Tanh"]}), ("GRU", {"clip": 2.0}),
                                       ("LSTM", {"peepholes": True}), ("LSTM", {"input_forget": 1})], ids=str)
def test_a_recurrent_op_the_compiled_loop_leaves_out_keeps_the_numpy_kernel(op: str, attrs: dict) -> None:
    """The compiled loops have the default sigmoid/tanh gates only, LSTM without peepholes or input_forget."""
    assert compiled_nodes(session(recurrent_tests.recurrent_model(op, **attrs), "compiled")) == []


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("rows, depth, cols", [(1, 5, 3), (7, 9, 17), (13, 300, 100), (49, 960, 160),
                                               (100, 7, 257), (6, 129, 64), (30, 0, 20)])
def test_compiled_gemm_matches_the_float64_product_with_bias_and_clamp(rows: int, depth: int, cols: int) -> None:
    """Every panel width (1-4 vectors, partial last vectors), rows past the last whole tile, K in several
    blocks (clamped only after the last: partial sums cross the bounds) and K = 0, on strided row views: the
    masked last vector writes nothing past column N."""
    from lite.kernels.compiled import gemm
    rng = np.random.default_rng(rows * 1000 + depth)
    a = rng.standard_normal((rows, depth + 3), dtype=np.float32)[:, :depth]
    w = rng.standard_normal((depth, cols), dtype=np.float32)
    bias = rng.standard_normal(cols, dtype=np.float32)
    wide = np.full((rows, cols + 5), np.nan, np.float32)
    out = wide[:, :cols]
    with selection("compiled", 2):
        run = gemm.bind(a, w, bias, -1.0, 2.0, out)
    for _ in range(2):
        run()
        want = np.clip(a.astype(np.float64) @ w + bias, -1.0, 2.0)
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * max(1, np.sqrt(depth)))
        assert np.isnan(wide[:, cols:]).all()
        a[...] = rng.standard_normal(a.shape, dtype=np.float32)      # the data is read at every run


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("rows, depth, cols", [(500, 40, 200), (700, 300, 130), (1000, 16, 197)])
def test_compiled_gemm_by_blocks_of_rows_matches_the_float64_product(rows: int, depth: int, cols: int,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks taken block of rows first, every panel in turn (`schedule`'s rows_first, here on small products
    through a small ROW_BLOCK_BYTES), with a residual sum and a clamp: every row and column written once."""
    from lite.kernels.compiled import gemm
    monkeypatch.setattr(gemm, "ROW_BLOCK_BYTES", 4 * depth * 120)
    block, rows_first = gemm.schedule(rows, depth, cols)
    blocks = -(-rows // 120)                                # blocks of at most 120 rows, of even size
    assert rows_first and block <= 120 and -(-rows // block) == blocks and block - rows // blocks < 16
    rng = np.random.default_rng(rows + depth)
    a, w = rng.standard_normal((rows, depth), dtype=np.float32), rng.standard_normal((depth, cols), dtype=np.float32)
    bias, residual = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal((rows, cols), dtype=np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    with selection("compiled", 2):
        gemm.bind(a, w, bias, -1.0, 2.0, out, residual)()
    want = np.clip(a.astype(np.float64) @ w + bias + residual, -1.0, 2.0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5 * np.sqrt(depth))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("cols, narrow", [(28, 24), (96, 88), (200, 1), (40, 17)])
def test_compiled_gemm_adds_a_narrower_residual_to_the_first_columns(cols: int, narrow: int) -> None:
    """A residual of fewer columns than the product (a channel-padded shortcut) is added to the first ones only,
    whatever panel and vector they end in; the rest get the bias alone. Against the float64 product."""
    from lite.kernels.compiled import gemm
    rng = np.random.default_rng(cols + narrow)
    rows, depth = 37, 150                       # two blocks of K: the residual enters with the first only
    a, w = rng.standard_normal((rows, depth), dtype=np.float32), rng.standard_normal((depth, cols), dtype=np.float32)
    bias, residual = rng.standard_normal(cols, dtype=np.float32), rng.standard_normal((rows, narrow), dtype=np.float32)
    out = np.full((rows, cols), np.nan, np.float32)
    with selection("compiled", 2):
        gemm.bind(a, w, bias, -np.inf, 3.0, out, residual)()
    want = a.astype(np.float64) @ w + bias
    want[:, :narrow] += residual
    np.testing.assert_allclose(out, np.minimum(want, 3.0), rtol=1e-5, atol=1e-5 * np.sqrt(depth))


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_gemm_schedule_reads_the_larger_operand_once() -> None:
    """Rows first where A outweighs the weights (ResNet-50's 1x1 convs at batch 16), panel by panel where the
    weights do (its last layers at batch 1)."""
    from lite.kernels.compiled import gemm
    assert gemm.schedule(50176, 64, 256)[1] and gemm.schedule(12544, 512, 128)[1]
    assert not gemm.schedule(49, 2048, 512)[1] and not gemm.schedule(784, 2048, 512)[1]
    assert gemm.schedule(196, 1024, 512) == (102, True)       # 102 + 94 rows, not 126 + 70: even blocks
    # a partial last panel (80 columns: 64 + 16): blocks of rows first, each with both panels, so that the two
    # threads' contiguous runs of tasks hold equal work; not when the weights would leave L2
    assert gemm.schedule(256, 72, 80)[1] and gemm.schedule(196, 672, 112)[1]
    assert not gemm.schedule(256, 72, 64)[1] and not gemm.schedule(49, 2048, 520)[1]


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),                               # ResNet's 3x3, same padding
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 2]),               # strided, uneven padding
    dict(kernel_shape=[1, 1], strides=[2, 2]),                                  # ResNet's 1x1 downsampling
    dict(kernel_shape=[3, 2], dilations=[2, 3], pads=[2, 1, 0, 3]),             # dilated, rectangular
    dict(kernel_shape=[5, 5]),                                                  # unpadded: the input itself
], ids=["3x3", "3x3-stride2", "1x1-stride2", "dilated", "5x5-valid"])
def test_dense_convs_of_wide_inputs_gather_their_windows_in_place(attrs: dict, kernels: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled GEMM reads each window from the padded input (row and run offsets, no im2col columns):
    against onnxruntime, on two images, with several K blocks per run (C = 160: whole kernel rows of KW x 160
    floats, or single taps where dilated) and partial panels, with a clamp fused. The 3x3 stride-1 conv is the
    GEMM's as in layers with fewer tiles than the compiled Winograd takes."""
    monkeypatch.setattr(compiled_conv2d, "COMPILED_WINOGRAD_TILES", 1 << 30)
    channels = compiled_conv2d.GATHER_RUN + 144
    feeds = {"x": _array((2, channels, 9, 11))}
    kh, kw = attrs["kernel_shape"]
    model = node_model("Conv", feeds, {"w": _array((70, channels, kh, kw)), "b": _array((70,))}, ["x", "w", "b"],
                       opset=14, **attrs)
    model.graph.node.append(helper.make_node("Relu", ["y"], ["act"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("act", onnx.TensorProto.FLOAT, None))
    s = session(model, kernels, threads=2)
    conv = next(step.kernel for step in s._plan.steps if step.node.op == "Conv2D")
    assert flag(conv, "gathered") is (kernels == "compiled")
    if kernels == "compiled":                       # no columns: at most the padded copy of the input
        assert len(conv.scratch()) == int(conv.geo.padded)
    want = run_ort(model, feeds)["act"]         # sums of up to 4000 products up to ~200: float32 rounding of that
    np.testing.assert_allclose(run_lite(s, feeds)["act"], want, rtol=1e-4, atol=1e-6 * np.abs(want).max())



@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("cin, cout, k, stride, size", [(3, 64, 7, 2, 30), (6, 16, 3, 1, 13), (8, 20, 5, 1, 9)],
                         ids=["resnet-stem", "3x3", "5x5"])
def test_convs_of_few_channels_gather_whole_kernel_rows(cin: int, cout: int, k: int, stride: int, size: int,
                                                        kernels: str) -> None:
    """Few input channels but kernel rows of GATHER_RUN floats or more (KW x C, contiguous in NHWC): the
    compiled GEMM reads them in place, one run per kernel row, instead of columns or the first-layer tiles;
    against onnxruntime."""
    feeds = {"x": _array((2, cin, size, size))}
    model = node_model("Conv", feeds, {"w": _array((cout, cin, k, k)), "b": _array((cout,))}, ["x", "w", "b"],
                       opset=14, pads=[k // 2] * 4, strides=[stride] * 2)
    s = session(model, kernels, threads=2)
    conv = next(step.kernel for step in s._plan.steps if step.node.op == "Conv2D")
    assert compiled_conv2d.window_run(conv.geo) == k * cin >= compiled_conv2d.GATHER_RUN
    assert flag(conv, "gathered") is (kernels == "compiled")
    assert not flag(conv, "compiled_direct")
    if kernels == "compiled":
        padded = np.zeros((2, size + 2 * (k // 2), size + k - 1, cin))
        rows_at, runs_at = compiled_conv2d.window_offsets(conv.geo, padded)
        assert len(runs_at) == k and len(rows_at) == conv.geo.rows
    want = run_ort(model, feeds)["y"]
    np.testing.assert_allclose(run_lite(s, feeds)["y"], want, rtol=1e-4, atol=1e-6 * np.abs(want).max())

RESIDUAL_CONVS = {    # (input channels, output channels, kernel, stride, group, height): one per Conv2D path
    "1x1": (40, 24, 1, 1, 1, 7),              # the NHWC rows themselves (compiled GEMM) / BLAS
    "3x3-gathered": (48, 20, 3, 1, 1, 4),     # windows read in place (compiled: 2 tiles, too few for F(4x4)) / im2col
    "3x3-winograd": (48, 20, 3, 1, 1, 9),     # compiled F(4x4) / im2col (two threads)
    "3x3-columns": (5, 16, 3, 1, 1, 9),       # im2col columns: kernel rows of 15 floats, under GATHER_RUN
    "strided": (40, 36, 3, 2, 1, 11),
    "depthwise": (24, 24, 3, 1, 24, 9),       # compiled direct tiles / numpy bands
    "winograd": (16, 16, 3, 1, 1, 18),        # one thread: compiled F(4x4) / numpy F(2x2)
}


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
@pytest.mark.parametrize("case", RESIDUAL_CONVS)
def test_a_residual_sum_fused_into_a_conv_matches_onnxruntime_on_every_path(case: str, act: str | None,
                                                                            kernels: str) -> None:
    """Conv(x) + Conv1x1(x) (a ResNet downsampling block) -> activation becomes the first conv with the second's
    output as its residual input (fuse_residual): the sum comes before the activation on every path (in the
    compiled GEMM's epilogue, over the residual's own memory, or added after the conv's own bias), against
    onnxruntime."""
    cin, cout, k, stride, group, size = RESIDUAL_CONVS[case]
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, cin, size, size])
    last = "act" if act else "sum"
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[k // 2] * 4, strides=[stride] * 2, group=group),
             helper.make_node("Conv", ["x", "wr"], ["r"], strides=[stride] * 2),
             helper.make_node("Add", ["y", "r"], ["sum"])]
    nodes += [helper.make_node(act, ["sum"], ["act"])] if act else []
    consts = {"w": _array((cout, cin // group, k, k)), "b": _array((cout,)), "wr": _array((cout, cin, 1, 1))}
    graph = helper.make_graph(nodes, "residual", [x], [helper.make_tensor_value_info(last, onnx.TensorProto.FLOAT,
                                                                                     None)],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    feeds = {"x": _array((2, cin, size, size))}
    s = session(model, kernels, threads=1 if case == "winograd" else 2)
    convs = [step for step in s._plan.steps if step.node.op != "Transpose"]
    assert [step.node.op for step in convs] == ["Conv2D", "Conv2D"]
    fused_step = next(step for step in convs if len(step.node.inputs) == 4)
    fused = fused_step.kernel
    in_place = any({fused_step.node.inputs[3], fused_step.node.outputs[0]} <= set(p.tensors)
                   for p in s._plan.placements)       # the output written over the residual, read just before
    fused_path = flag(fused, "fused_gemm") or flag(fused, "winograd_fused")
    assert in_place is fused_path and in_place is (kernels == "compiled" and case != "depthwise")
    assert case != "winograd" or (flag(fused, "winograd_fused") if kernels == "compiled" else fused.winograd)
    assert flag(fused, "winograd_fused") is (kernels == "compiled" and case in ("winograd", "3x3-winograd"))
    probe = onnx.ModelProto()            # onnxruntime also reports the sum before the activation
    probe.CopyFrom(model)
    if act:
        probe.graph.output.append(helper.make_tensor_value_info("sum", onnx.TensorProto.FLOAT, None))
    want = run_ort(probe, feeds)
    np.testing.assert_allclose(run_lite(s, feeds)[last], want[last], rtol=1e-4,
                               atol=winograd_atol(fused, want["sum"]))


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
def test_a_residual_sum_fused_into_a_gemm_matches_onnxruntime(act: str | None, kernels: str) -> None:
    """A transformer's projection: Gemm(x) + x -> activation becomes one FullConnection with x as its residual
    input (the compiled GEMM's epilogue for clamps, BLAS then the sum and the activation otherwise)."""
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [13, 40])
    last = "act" if act else "sum"
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1), helper.make_node("Add", ["y", "x"], ["sum"])]
    nodes += [helper.make_node(act, ["sum"], ["act"])] if act else []
    graph = helper.make_graph(nodes, "projection", [x],
                              [helper.make_tensor_value_info(last, onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(_array((40, 40)), "w"), numpy_helper.from_array(_array((40,)), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    feeds = {"x": _array((13, 40))}
    s = session(model, kernels, threads=2)
    (step,) = s._plan.steps
    assert step.node.op == "FullConnection" and len(step.node.inputs) == 4
    assert flag(step.kernel, "fused") is (kernels == "compiled" and act != "Sigmoid")
    np.testing.assert_allclose(run_lite(s, feeds)[last], run_ort(model, feeds)[last], rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
@pytest.mark.parametrize("quads", [True, False], ids=["vnni-quads", "int16-pairs"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("rows, depth, cols", [(1, 5, 3), (13, 7, 33), (49, 300, 64), (100, 18, 40)])
@pytest.mark.parametrize("rounding", ["tflite", "nnacl"])
def test_int8_gemm_matches_the_integer_product_requantized(rows: int, depth: int, cols: int, dtype: type,
                                                           quads: bool, rounding: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Both product forms (vpdpbusd quads where the host has VNNI, int16 pairs everywhere) bit for bit against
    the int64 product requantized in integers (TFLite's rounding, or MindSpore Lite's two, whose ties below
    zero power-of-two multipliers make common): K not a multiple of 4, partial column blocks, rows past the last
    tile (nothing written past N), and the extreme codes (-128 weights and inputs) where the quads' sign flip
    must cancel."""
    from lite.kernels.compiled import int8
    from lite.kernels.int8.requantize import Requantizer, multiply_by_quantized_multiplier, quantize_multipliers
    if quads and not int8.VNNI:
        pytest.skip("the host has no AVX-512 VNNI")
    monkeypatch.setattr(int8, "VNNI", quads)
    info = np.iinfo(dtype)
    rng = np.random.default_rng(rows + depth + cols)
    x = rng.integers(info.min, info.max + 1, (rows, depth)).astype(dtype)
    w = rng.integers(-128, 128, (depth, cols)).astype(np.int16)
    x[0, :] = info.min
    w[:, 0] = -128
    acc = x.astype(np.int64) @ w.astype(np.int64)
    reals = rng.uniform(1e-4, 1e-3, cols)
    reals[::3] = 2.0 ** -rng.integers(7, 12, len(reals[::3]))
    requantize = Requantizer.build(reals, -3, -128, 127, rounding=rounding)
    assert requantize.exact and (requantize.below is None) == (rounding == "tflite")
    want = np.clip(multiply_by_quantized_multiplier(acc, *quantize_multipliers(reals), rounding) - 3, -128, 127)
    wide = np.full((rows, cols + 7), 99, np.int8)
    out = wide[:, :cols]
    with selection("compiled", 2):
        assert int8.quads_fit(w) == quads
        int8.bind(x, w, requantize, out)()
    np.testing.assert_array_equal(out, want)
    assert (wide[:, cols:] == 99).all()          # the last block's lane mask writes nothing past column N


@pytest.mark.parametrize("kernels", PATHS)
@pytest.mark.parametrize("op", [None, "Relu", "Sigmoid"])
def test_dense_convs_and_gemms_of_a_constant_weight_take_the_compiled_gemm(op: str | None, kernels: str) -> None:
    """A 3x3 conv (im2col columns) and a Gemm of constant weights with bias: the compiled GEMM with bias and a
    clamp fused, another activation after it; a MatMul of two inputs stays on BLAS."""
    feeds = {"x": _array((2, 8, 9, 7))}
    model = node_model("Conv", feeds, {"w": _array((40, 8, 3, 3)), "b": _array((40,))}, ["x", "w", "b"],
                       opset=14, pads=[1, 1, 1, 1])
    graph, last = model.graph, "y"
    if op is not None:
        graph.node.append(helper.make_node(op, ["y"], ["act"]))
        last = "act"
    graph.node.extend([helper.make_node("Flatten", [last], ["flat"]),
                       helper.make_node("Gemm", ["flat", "fw", "fb"], ["z"], transB=1)])
    graph.initializer.extend([numpy_helper.from_array(_array((21, 40 * 9 * 7)), "fw"),
                              numpy_helper.from_array(_array((21,)), "fb")])
    graph.output[0].CopyFrom(helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, None))
    s = session(model, kernels, threads=2)
    kinds = {step.node.op: step.kernel for step in s._plan.steps}
    assert flag(kinds["Conv2D"], "fused_gemm") is (kernels == "compiled")
    assert flag(kinds["FullConnection"], "fused") is (kernels == "compiled")
    want = run_ort(model, feeds)["z"]           # sums of 2520 products up to ~800: float32 rounding of that scale
    np.testing.assert_allclose(run_lite(s, feeds)["z"], want, rtol=1e-4, atol=1e-6 * np.abs(want).max())


@pytest.mark.skipif(not HAVE_NUMBA, reason="numba not installed")
def test_sessions_give_the_threads_to_the_pool_that_runs_most_of_the_work(monkeypatch) -> None:
    """A CNN of constant weights runs compiled: BLAS gets one thread; a product of two inputs runs in BLAS:
    the compiled kernels get one, as they do in a session of numpy kernels."""
    cnn, _ = conv_relu6("pointwise")
    assert session(cnn, "compiled", threads=2)._compiled_first
    assert not session(cnn, "numpy", threads=2)._compiled_first
    feeds = {"a": _array((64, 96)), "b": _array((96, 80))}
    product = node_model("MatMul", feeds, {}, ["a", "b"], outputs=("c",))
    s = session(product, "compiled", threads=2)
    assert not s._compiled_first
    np.testing.assert_allclose(run_lite(s, feeds)["c"], feeds["a"] @ feeds["b"], rtol=1e-5, atol=1e-5)
    monkeypatch.setattr(threads, "overloaded", lambda: False)      # a busy machine keeps every run on one thread
    assert threads.split(2, True) == (2, 1) and threads.split(2, False) == (1, 2)


def test_openmp_workers_spin_briefly_unless_the_user_says_otherwise() -> None:
    """Importing the compiled kernels sets GOMP_SPINCOUNT (and a passive wait policy) only where the user set
    neither; OMP_WAIT_POLICY=ACTIVE is left to spin as libgomp does."""
    code = ("import os, lite.kernels.compiled; "
            "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))")

    def probe(**env: str) -> list[str]:
        clean = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
        return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.split()
    assert probe() == [str(compiled.SPIN_COUNT), "PASSIVE"]
    assert probe(GOMP_SPINCOUNT="0") == ["0", "PASSIVE"]
    assert probe(OMP_WAIT_POLICY="PASSIVE") == [str(compiled.SPIN_COUNT), "PASSIVE"]
    assert probe(OMP_WAIT_POLICY="ACTIVE") == ["None", "ACTIVE"]
