"""The TFLite frontend against LiteRT: one small `.tflite` per builtin (built with the schema's builders), run by
LiteRT's Interpreter and by our converter + runtime; float outputs within 1e-4 of the output range."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

import lite

from tests.tflite_models import TFLiteModel, check, litert_interpreter, rand, run_litert, single

pytest.importorskip("tflite", reason="the TFLite frontend reads files with the 'tflite' package")
litert_interpreter()

W = rand(4, 3, 3, 3)
CASES: dict[str, Callable[[], tuple[bytes, list[np.ndarray]]]] = {
    "conv_same_relu": lambda: single("CONV_2D", [(1, 9, 9, 3), W, rand(4)], 1, "Conv2DOptions", Padding=0,
                                     StrideW=2, StrideH=2, FusedActivationFunction=1),
    "conv_valid_dilated_relu6": lambda: single("CONV_2D", [(2, 9, 9, 3), W, rand(4)], 1, "Conv2DOptions",
                                               Padding=1, StrideW=1, StrideH=1, DilationWFactor=2, DilationHFactor=2,
                                               FusedActivationFunction=3),
    "conv_relu_n1_to_1": lambda: single("CONV_2D", [(1, 6, 6, 3), W, rand(4)], 1, "Conv2DOptions", Padding=0,
                                        StrideW=1, StrideH=1, FusedActivationFunction=2),
    "depthwise_multiplier": lambda: single("DEPTHWISE_CONV_2D", [(1, 8, 8, 3), rand(1, 3, 3, 6), rand(6)], 1,
                                           "DepthwiseConv2DOptions", Padding=0, StrideW=2, StrideH=2,
                                           DepthMultiplier=2, FusedActivationFunction=3),
    "transpose_conv_same": lambda: single("TRANSPOSE_CONV", [np.array([1, 8, 8, 4], np.int32), rand(4, 3, 3, 3),
                                                            (1, 4, 4, 3), rand(4)], 1, "TransposeConvOptions",
                                          Padding=0, StrideW=2, StrideH=2),
    "transpose_conv_valid": lambda: single("TRANSPOSE_CONV", [np.array([1, 9, 9, 2], np.int32), rand(2, 3, 3, 3),
                                                             (1, 4, 4, 3)], 1, "TransposeConvOptions",
                                           Padding=1, StrideW=2, StrideH=2),
    "fully_connected_flattens": lambda: single("FULLY_CONNECTED", [(2, 3, 4), rand(5, 4), rand(5)], 1,
                                               "FullyConnectedOptions", FusedActivationFunction=1),
    "fully_connected_keep_dims": lambda: single("FULLY_CONNECTED", [(2, 3, 4), rand(5, 4), None], 1,
                                                "FullyConnectedOptions", KeepNumDims=True),
    "fully_connected_runtime_weight": lambda: single("FULLY_CONNECTED", [(3, 4), (5, 4), rand(5)], 1,
                                                     "FullyConnectedOptions"),
    "batch_matmul_adjoint": lambda: single("BATCH_MATMUL", [(2, 4, 3), (2, 5, 4)], 1, "BatchMatMulOptions",
                                           AdjX=True, AdjY=True),
    "average_pool_same": lambda: single("AVERAGE_POOL_2D", [(1, 7, 7, 3)], 1, "Pool2DOptions", Padding=0,
                                        StrideW=2, StrideH=2, FilterWidth=3, FilterHeight=3),
    "max_pool_relu": lambda: single("MAX_POOL_2D", [(1, 8, 8, 3)], 1, "Pool2DOptions", Padding=1, StrideW=2,
                                    StrideH=2, FilterWidth=2, FilterHeight=2, FusedActivationFunction=1),
    "l2_pool": lambda: single("L2_POOL_2D", [(1, 6, 6, 2)], 1, "Pool2DOptions", Padding=0, StrideW=2, StrideH=2,
                              FilterWidth=2, FilterHeight=2),
    "softmax_beta": lambda: single("SOFTMAX", [(3, 10)], 1, "SoftmaxOptions", Beta=0.5),
    "log_softmax": lambda: single("LOG_SOFTMAX", [(3, 10)], 1, "LogSoftmaxOptions"),
    "l2_normalization": lambda: single("L2_NORMALIZATION", [(2, 3, 8)], 1, "L2NormOptions"),
    "local_response_normalization": lambda: single("LOCAL_RESPONSE_NORMALIZATION", [(1, 4, 4, 9)], 1,
                                                   "LocalResponseNormalizationOptions", Radius=2, Bias=1.0,
                                                   Alpha=0.1, Beta=0.75),
    "prelu": lambda: single("PRELU", [(1, 4, 4, 3), rand(1, 1, 3)]),
    "leaky_relu": lambda: single("LEAKY_RELU", [(2, 7)], 1, "LeakyReluOptions", Alpha=0.1),
    "gelu": lambda: single("GELU", [(2, 7)], 1, "GeluOptions", Approximate=False),
    "gelu_tanh": lambda: single("GELU", [(2, 7)], 1, "GeluOptions", Approximate=True),
    "add_broadcast_relu6": lambda: single("ADD", [(2, 3, 4), rand(4)], 1, "AddOptions", FusedActivationFunction=3),
    "sub": lambda: single("SUB", [(2, 3, 4), (2, 1, 4)], 1, "SubOptions"),
    "mul_relu": lambda: single("MUL", [(2, 3, 4), (3, 1)], 1, "MulOptions", FusedActivationFunction=1),
    "div": lambda: single("DIV", [(2, 3), rand(3, low=0.5, high=2.0)], 1, "DivOptions"),
    "maximum": lambda: single("MAXIMUM", [(2, 3), (2, 3)]),
    "minimum": lambda: single("MINIMUM", [(2, 3), rand(3)]),
    "pow": lambda: single("POW", [rand(2, 3, low=0.5, high=2.0), (2, 3)]),
    "squared_difference": lambda: single("SQUARED_DIFFERENCE", [(2, 3), (2, 3)]),
    "square": lambda: single("SQUARE", [(2, 3)]),
    "rsqrt": lambda: single("RSQRT", [rand(2, 3, low=0.5, high=2.0)]),
    "sqrt": lambda: single("SQRT", [rand(2, 3, low=0.1, high=2.0)]),
    "exp": lambda: single("EXP", [(2, 3)]),
    "log": lambda: single("LOG", [rand(2, 3, low=0.1, high=2.0)]),
    "abs": lambda: single("ABS", [(2, 3)]),
    "neg": lambda: single("NEG", [(2, 3)]),
    "mean_keep_dims": lambda: single("MEAN", [(2, 4, 4, 3), np.array([1, 2], np.int32)], 1, "ReducerOptions",
                                     KeepDims=True),
    "sum": lambda: single("SUM", [(2, 4, 3), np.array([-1], np.int32)], 1, "ReducerOptions"),
    "reduce_max": lambda: single("REDUCE_MAX", [(2, 4, 3), np.array([0, 2], np.int32)], 1, "ReducerOptions"),
    "reduce_min": lambda: single("REDUCE_MIN", [(2, 4, 3), np.array([1], np.int32)], 1, "ReducerOptions"),
    "reduce_prod": lambda: single("REDUCE_PROD", [(2, 4, 3), np.array([1], np.int32)], 1, "ReducerOptions"),
    "reshape_input": lambda: single("RESHAPE", [(2, 3, 4), np.array([4, -1], np.int32)]),
    "reshape_options": lambda: single("RESHAPE", [(2, 3, 4)], 1, "ReshapeOptions", NewShape=[-1, 12]),
    "squeeze": lambda: single("SQUEEZE", [(1, 3, 1, 4)], 1, "SqueezeOptions", SqueezeDims=[2]),
    "squeeze_all": lambda: single("SQUEEZE", [(1, 3, 1, 4)], 1, "SqueezeOptions"),
    "expand_dims": lambda: single("EXPAND_DIMS", [(3, 4), np.array(-1, np.int32)]),
    "slice": lambda: single("SLICE", [(3, 5, 4), np.array([1, 0, 1], np.int32), np.array([2, -1, 2], np.int32)],
                            out_shape=(2, 5, 2)),
    "strided_slice_masks": lambda: single("STRIDED_SLICE", [(4, 6, 5), np.array([1, 0, 4], np.int32),
                                                            np.array([3, 5, 0], np.int32),
                                                            np.array([1, 2, -2], np.int32)], 1,
                                          "StridedSliceOptions", BeginMask=2, EndMask=1),
    "strided_slice_shrink_new_axis": lambda: single("STRIDED_SLICE", [(4, 6, 5), np.array([2, 0, 1], np.int32),
                                                                      np.array([3, 0, 4], np.int32),
                                                                      np.array([1, 1, 1], np.int32)], 1,
                                                    "StridedSliceOptions", ShrinkAxisMask=1, NewAxisMask=2),
    "strided_slice_ellipsis": lambda: single("STRIDED_SLICE", [(2, 3, 4, 6), np.array([0, 1], np.int32),
                                                               np.array([0, 5], np.int32),
                                                               np.array([1, 2], np.int32)], 1,
                                             "StridedSliceOptions", EllipsisMask=1),
    "concatenation": lambda: single("CONCATENATION", [(2, 3), (2, 4), rand(2, 1)], 1,
                                         "ConcatenationOptions", Axis=-1),
    "split": lambda: single("SPLIT", [np.array(1, np.int32), (2, 6, 3)], 3, "SplitOptions", NumSplits=3),
    "split_v": lambda: single("SPLIT_V", [(2, 7, 3), np.array([2, -1, 1], np.int32), np.array([1], np.int32)], 3,
                              "SplitVOptions", NumSplits=3),
    "pack": lambda: single("PACK", [(2, 3), (2, 3), (2, 3)], 1, "PackOptions", ValuesCount=3, Axis=1),
    "unpack": lambda: single("UNPACK", [(2, 3, 4)], 3, "UnpackOptions", Num=3, Axis=1),
    "gather": lambda: single("GATHER", [(5, 3), np.array([[4, 0], [2, 2]], np.int32)], 1, "GatherOptions",
                             Axis=0),
    "transpose": lambda: single("TRANSPOSE", [(2, 3, 4), np.array([2, 0, 1], np.int32)]),
    "pad": lambda: single("PAD", [(1, 3, 3, 2), np.array([[0, 0], [1, 2], [2, 1], [0, 0]], np.int32)]),
    "padv2": lambda: single("PADV2", [(2, 3), np.array([[1, 0], [0, 2]], np.int32), np.array([0.5], np.float32)]),
    "mirror_pad_reflect": lambda: single("MIRROR_PAD", [(1, 4, 4, 2),
                                                        np.array([[0, 0], [2, 1], [1, 2], [0, 0]], np.int32)], 1,
                                         "MirrorPadOptions", Mode=0),
    "resize_bilinear": lambda: single("RESIZE_BILINEAR", [(1, 4, 5, 2), np.array([7, 9], np.int32)], 1,
                                      "ResizeBilinearOptions"),
    "resize_bilinear_half_pixel": lambda: single("RESIZE_BILINEAR", [(1, 4, 5, 2), np.array([8, 3], np.int32)], 1,
                                                 "ResizeBilinearOptions", HalfPixelCenters=True),
    "resize_bilinear_align_corners": lambda: single("RESIZE_BILINEAR", [(1, 4, 5, 2), np.array([7, 9], np.int32)],
                                                    1, "ResizeBilinearOptions", AlignCorners=True),
    "resize_nearest": lambda: single("RESIZE_NEAREST_NEIGHBOR", [(1, 4, 5, 2), np.array([7, 9], np.int32)], 1,
                                     "ResizeNearestNeighborOptions"),
    "resize_nearest_half_pixel": lambda: single("RESIZE_NEAREST_NEIGHBOR", [(1, 4, 5, 2),
                                                                            np.array([8, 3], np.int32)], 1,
                                                "ResizeNearestNeighborOptions", HalfPixelCenters=True),
    "resize_nearest_align_corners": lambda: single("RESIZE_NEAREST_NEIGHBOR", [(1, 4, 5, 2),
                                                                               np.array([7, 9], np.int32)], 1,
                                                   "ResizeNearestNeighborOptions", AlignCorners=True),
    "arg_max": lambda: single("ARG_MAX", [(3, 5, 4), np.array([1], np.int32)], 1, "ArgMaxOptions",
                              out_dtypes=(np.int32,), OutputType=2),
    "arg_min_int64": lambda: single("ARG_MIN", [(3, 5, 4), np.array([-1], np.int32)], 1, "ArgMinOptions",
                                    out_dtypes=(np.int64,), OutputType=4),
    "top_k": lambda: single("TOPK_V2", [(3, 7), np.array(3, np.int32)], 2,
                            out_dtypes=(np.float32, np.int32)),
    "tile": lambda: single("TILE", [(2, 3), np.array([2, 3], np.int32)]),
    "depth_to_space": lambda: single("DEPTH_TO_SPACE", [(1, 3, 4, 8)], 1, "DepthToSpaceOptions", BlockSize=2,
                                     out_shape=(1, 6, 8, 2)),
    "space_to_depth": lambda: single("SPACE_TO_DEPTH", [(1, 4, 6, 3)], 1, "SpaceToDepthOptions", BlockSize=2,
                                     out_shape=(1, 2, 3, 12)),
}
for _op in ("RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "HARD_SWISH", "ELU"):
    CASES[_op.lower()] = (lambda op: lambda: single(op, [(2, 3, 5)]))(_op)


@pytest.mark.parametrize("case", sorted(CASES))
def test_builtin_matches_litert(case):
    data, feeds = CASES[case]()
    feeds = [x * 4 for x in feeds] if case.startswith(("relu", "logistic", "tanh", "hard_swish", "elu")) else feeds
    check(data, feeds)


# ---- constants stored as float16 (DEQUANTIZE) and sparse (DENSIFY) -------------------------------------------------
def conv_model(weight_tensor: Callable[[TFLiteModel], int], dequantize: str | None) -> bytes:
    """x [1, 6, 6, 3] -> CONV_2D with the weight from `weight_tensor`, behind a `dequantize` op if given."""
    m = TFLiteModel()
    x, y = m.tensor([1, 6, 6, 3], name="x"), m.tensor([1, 6, 6, 4], name="y")
    w = weight_tensor(m)
    if dequantize:
        dense = m.tensor([4, 3, 3, 3], name="w_dense")
        m.op(dequantize, [w], [dense])
        w = dense
    m.op("CONV_2D", [x, w, m.const(rand(4))], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1)
    return m.build([x], [y])


def test_float16_weights_behind_dequantize():
    w16 = W.astype(np.float16)
    data = conv_model(lambda m: m.const(w16), "DEQUANTIZE")
    check(data, [rand(1, 6, 6, 3)])


def block_sparse(dense: np.ndarray, block: int) -> "Sparse":
    """[O, I] as TFLite's sparse FC weights: dim 0 dense, dim 1 CSR over blocks of `block` columns."""
    from tests.tflite_models import Sparse
    rows, cols = dense.shape
    blocks = dense.reshape(rows, cols // block, block)
    keep = np.abs(blocks).sum(axis=2) > 0
    segments = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).tolist()
    indices = np.nonzero(keep)[1].tolist()
    return Sparse(blocks[keep].ravel(), [0, 1, 2], [1], [(rows, None, None), (cols // block, segments, indices),
                                                          (block, None, None)])


def test_sparse_weights_behind_densify():
    dense = rand(6, 8)
    dense[:, 4:] *= np.array([1, 0, 1, 0, 0, 1], np.float32)[:, None]     # whole zero blocks
    dense[1, :4] = 0
    m = TFLiteModel()
    x, y = m.tensor([3, 8], name="x"), m.tensor([3, 6], name="y")
    w = m.tensor([6, 8], np.float32, name="w_sparse", sparse=block_sparse(dense, 4))
    w_dense = m.tensor([6, 8], name="w")
    m.op("DENSIFY", [w], [w_dense])
    m.op("FULLY_CONNECTED", [x, w_dense, m.const(rand(6))], [y], "FullyConnectedOptions")
    check(m.build([x], [y]), [rand(3, 8)])


def test_densified_constant_is_the_dense_weight():
    """The sparse encoding read back equals the dense array it was made from (no oracle needed: the
    dense array is the input)."""
    from converter.frontends.tflite.reader import read_model
    dense = rand(6, 8)
    dense[2] = 0
    dense[4, 4:] = 0
    m = TFLiteModel()
    w = m.tensor([6, 8], np.float32, name="w", sparse=block_sparse(dense, 4))
    m.op("DENSIFY", [w], [m.tensor([6, 8], name="out")])
    record = read_model(m.build([], [1]))
    np.testing.assert_array_equal(record.tensors[0].data, dense)


# ---- names, shapes -------------------------------------------------------------------------------------------------
def test_signature_def_names_graph_inputs_and_outputs():
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="serving_default_x:0"), m.tensor([2, 3], name="StatefulPartitionedCall:0")
    m.op("RELU", [x], [y])
    session_data = m.build([x], [y], signature={"inputs": ["image"], "outputs": ["scores"]})
    from tests.tflite_models import session_of
    session = session_of(session_data)
    assert [t.tensor_name() for t in session.GetInputs()] == ["image"]
    assert list(session.GetOutputs()) == ["scores"]


def test_converted_file_records_tflite_as_its_source(tmp_path, capsys):
    """MetaGraph.fmk_type is MindSpore Lite's FmkType TFLITE (4), and lite.inspect shows it."""
    from converter import convert_tflite
    from lite.inspect import main as inspect_main
    buf = convert_tflite(relu_model())
    assert lite.Model.Import(buf).fmk_type == 4
    (tmp_path / "m.ms").write_bytes(buf)
    assert inspect_main([str(tmp_path / "m.ms")]) == 0
    assert ", from TFLITE" in capsys.readouterr().out


def test_dynamic_batch_resizes():
    m = TFLiteModel()
    x = m.tensor([1, 4, 4, 3], name="x", signature=[-1, 4, 4, 3])
    y = m.tensor([1, 4, 4, 4], name="y", signature=[-1, 4, 4, 4])
    m.op("CONV_2D", [x, m.const(W), m.const(rand(4))], [y], "Conv2DOptions", Padding=0, StrideW=1, StrideH=1)
    check(m.build([x], [y]), [rand(3, 4, 4, 3)])


# ---- refusals: named status and culprit ----------------------------------------------------------------------------
def relu_model(version: int = 3) -> bytes:
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="y")
    m.op("RELU", [x], [y])
    return m.build([x], [y], version=version)


def import_error(data: bytes) -> lite.LiteError:
    from converter import convert_tflite
    with pytest.raises(lite.LiteError) as info:
        convert_tflite(data, source="model.tflite")
    return info.value


def test_truncated_file_is_graph_file_error():
    data = conv_model(lambda m: m.const(W), None)
    for cut in (len(data) // 3, len(data) - 40, 6):
        e = import_error(data[:cut])
        assert e.status == lite.RET_GRAPH_FILE_ERR and "model.tflite" in str(e)


def test_corrupted_file_is_graph_file_error():
    data = bytearray(conv_model(lambda m: m.const(W), None))
    rng = np.random.default_rng(1)
    for _ in range(20):
        spoilt = bytearray(data)
        at = rng.integers(8, len(data), 12)
        spoilt[at[0]:at[0] + 4] = b"\xff\xff\xff\x7f"
        for i in at[1:]:
            spoilt[i] = int(rng.integers(0, 256))
        try:
            convert_tflite_bytes(bytes(spoilt))
        except lite.LiteError as e:
            assert e.status in (lite.RET_GRAPH_FILE_ERR, lite.RET_NOT_SUPPORT, lite.RET_INFER_ERR,
                                lite.RET_INVALID_OP_ATTR, lite.RET_INPUT_TENSOR_ERROR)


def convert_tflite_bytes(data: bytes) -> bytes:
    from converter import convert_tflite
    return convert_tflite(data, source="model.tflite")


def test_foreign_file_is_graph_file_error():
    e = import_error(b"\x1c\x00\x00\x00MSPY" + bytes(64))
    assert e.status == lite.RET_GRAPH_FILE_ERR and "TFL3" in str(e)


def test_unknown_schema_version_is_graph_file_error():
    e = import_error(relu_model(version=4))
    assert e.status == lite.RET_GRAPH_FILE_ERR and "version 4" in str(e)


def test_custom_op_is_not_supported_naming_op_and_node():
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="postprocess/out")
    m.op("CUSTOM", [x], [y], custom="TFLite_Detection_PostProcess")
    e = import_error(m.build([x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT
    assert "TFLite_Detection_PostProcess" in str(e) and "postprocess/out" in str(e)


@pytest.mark.parametrize("op", ["LSTM", "RNN", "SVDF"])
def test_one_step_recurrent_ops_are_refused_for_their_state_across_invocations(op):
    """The one-step recurrent ops carry their state from one invocation to the next; the refusal says so and
    points to the sequence LSTMs, which import."""
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="step_out")
    m.op(op, [x], [y])
    e = import_error(m.build([x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT and f"'{op}'" in str(e) and "step_out" in str(e)
    assert "state kept across invocations" in str(e) and "UNIDIRECTIONAL_/BIDIRECTIONAL_SEQUENCE_LSTM" in str(e)


def test_cli_converts_tflite(tmp_path, capsys):
    from converter.cli import main
    src = tmp_path / "m.tflite"
    src.write_bytes(conv_model(lambda m: m.const(W), None))
    assert main(["--fmk=TFLITE", f"--modelFile={src}", f"--outputFile={tmp_path / 'm'}"]) == lite.RET_OK
    assert "CONVERT RESULT SUCCESS:0" in capsys.readouterr().out
    model = lite.Model.Load(str(tmp_path / "m.ms"))
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(model)
    assert session.GetInputs()[0].shape() == [1, 6, 6, 3]


def test_cli_reports_truncated_tflite(tmp_path, capsys):
    from converter.cli import main
    src = tmp_path / "cut.tflite"
    src.write_bytes(conv_model(lambda m: m.const(W), None)[:100])
    assert main(["--fmk=TFLITE", f"--modelFile={src}", f"--outputFile={tmp_path / 'm'}"]) == lite.RET_GRAPH_FILE_ERR
    captured = capsys.readouterr()
    assert "CONVERT RESULT FAILED:-200" in captured.out and "cut.tflite" in captured.err


def test_benchmark_lite_checks_converted_model_against_litert_outputs(tmp_path, capsys):
    """benchmark_lite's accuracy mode runs the converted file on LiteRT's input and compares with LiteRT's
    outputs."""
    from converter.cli import main as converter_lite
    from lite.tools.benchmark import main as benchmark_lite
    data = conv_model(lambda m: m.const(W), None)
    (tmp_path / "m.tflite").write_bytes(data)
    assert converter_lite(["--fmk=TFLITE", f"--modelFile={tmp_path / 'm.tflite'}",
                           f"--outputFile={tmp_path / 'm'}"]) == lite.RET_OK
    x = rand(1, 6, 6, 3)
    x.tofile(tmp_path / "x.bin")
    np.savez(tmp_path / "expected.npz", y=run_litert(data, [x])[0])
    assert benchmark_lite([f"--modelFile={tmp_path / 'm.ms'}", f"--inDataFile={tmp_path / 'x.bin'}",
                           f"--benchmarkDataFile={tmp_path / 'expected.npz'}", "--loopCount=2",
                           "--accuracyThreshold=0.01"]) == lite.RET_OK
    assert "Mean bias of node/tensor y" in capsys.readouterr().out


@pytest.mark.parametrize("code,name", [("STABLEHLO_ADD", "StableHLO"), ("RANDOM_UNIFORM", "Philox"),
                                       ("HASHTABLE_LOOKUP", "string")])
def test_refused_builtins_name_op_node_and_reason(code, name):
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="odd/out")
    m.op(code, [x, x], [y])
    e = import_error(m.build([x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT and code in str(e) and "odd/out" in str(e) and name in str(e)


def test_builtin_code_beyond_the_schema_is_named():
    """A file from a newer schema: an operator code this reader has no name for."""
    m = TFLiteModel()
    x, y = m.tensor([2, 3], name="x"), m.tensor([2, 3], name="future")
    m.op("RELU", [x], [y])
    m.codes[0] = (4000, None, 1)
    e = import_error(m.build([x], [y]))
    assert e.status == lite.RET_NOT_SUPPORT and "BUILTIN_4000" in str(e) and "future" in str(e)
