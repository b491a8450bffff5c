"""Each optimisation pass keeps the graph's meaning, alone or together, and does its one job."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import models
from converter import to_graph
from converter.export import to_bytes
from converter.passes import PASSES
import lite
from schema import fb
from tests.util import run_lite, run_ort, small_cnn


def _session(graph) -> lite.LiteSession:
    buf = to_bytes(graph)
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def _ops(graph) -> list[str]:
    return [n.op for n in graph.nodes]


@pytest.mark.parametrize("model_name", ["small_cnn", "mobilenet_v3_small", "efficientnet_b0"])
@pytest.mark.parametrize("only", [None, *PASSES])
def test_each_pass_alone_keeps_outputs(model_name: str, only: str | None) -> None:
    model = small_cnn() if model_name == "small_cnn" else models.build(model_name, num_classes=10,
                                                                          input_size=32)
    disabled = [p for p in PASSES if p != only] if only else []
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8) if model_name == "small_cnn"
                                                 else (1, 3, 32, 32)).astype(np.float32)
    got = run_lite(_session(to_graph(model, disabled_passes=disabled)), {"input": x})
    want = run_ort(model, {"input": x})
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-5 * np.abs(expected).max())


def test_fuse_batchnorm_removes_batchnorm() -> None:
    assert "BatchNorm" in _ops(to_graph(small_cnn(), disabled_passes=["fuse_batchnorm"]))
    assert "BatchNorm" not in _ops(to_graph(small_cnn()))


def test_fuse_activation_folds_relu_into_conv() -> None:
    graph = to_graph(small_cnn())
    conv1 = next(n for n in graph.nodes if n.op == "Conv2D" and n.name == "conv1")
    assert conv1.attrs["activation"] == fb.ActivationType.RELU
    assert "Activation" not in _ops(graph)


def test_fuse_activation_recognises_swish_and_hard_swish() -> None:
    graph = to_graph(models.build("efficientnet_b0", num_classes=10, input_size=32))
    kinds = {n.attrs.get("activation") for n in graph.nodes if n.op == "Conv2D"}
    assert fb.ActivationType.SWISH in kinds
    graph = to_graph(models.build("mobilenet_v3_small", num_classes=10, input_size=32))
    kinds = {n.attrs.get("activation") for n in graph.nodes if n.op == "Conv2D"}
    assert fb.ActivationType.HSWISH in kinds


def test_to_nhwc_leaves_transposes_only_at_the_border() -> None:
    graph = to_graph(models.build("resnet18", num_classes=10, input_size=32))
    assert _ops(graph).count("Transpose") == 1        # the NCHW input; the GAP output becomes a Reshape
    assert graph.producer(graph.nodes[0].outputs[0]) is graph.nodes[0]
    unoptimised = to_graph(models.build("resnet18", num_classes=10, input_size=32), disabled_passes=["to_nhwc"])
    assert _ops(unoptimised).count("Transpose") > 30


def _shape_subgraph_model() -> tuple:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 24])
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "zero_axes"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus_one"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "zero_axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus_one")]
    return helper.make_model(helper.make_graph(nodes, "shape_subgraph", [x], [y], inits),
                             opset_imports=[helper.make_opsetid("", 13)])


def test_fold_constants_folds_static_shape_subgraphs() -> None:
    graph = to_graph(_shape_subgraph_model(), input_shapes={"x": [2, 2, 3, 4]})
    assert _ops(graph) == ["Reshape"]


def test_dynamic_batch_keeps_shape_computation_until_run_time() -> None:
    model = _shape_subgraph_model()
    session = _session(to_graph(model))
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 2, 3, 4)).astype(np.float32)
        np.testing.assert_array_equal(run_lite(session, {"x": x})["y"], run_ort(model, {"x": x})["y"])


def test_remove_identity_keeps_output_names() -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Dropout", ["r"], ["d"]),
             helper.make_node("Identity", ["d"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "ids", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])
    graph = to_graph(model)
    assert _ops(graph) == ["Activation"] and graph.outputs == ["y"]
    assert _ops(to_graph(model, disabled_passes=["remove_identity"])).count("Identity") == 1


def test_remove_identity_keeps_shape_ops_on_run_time_shapes() -> None:
    """A value whose shape comes from a run-time Reshape target has a rank unknown at conversion: an Unsqueeze
    of it is never a no-op by the shapes recorded at conversion."""
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("s", TensorProto.INT64, [1])]
    axes = numpy_helper.from_array(np.array([-1], np.int64), "axes")
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Unsqueeze", ["r", "axes"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "dyn", inputs, [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, None)], [axes]), opset_imports=[helper.make_opsetid("", 13)])
    feeds = {"x": np.array(3.0, np.float32), "s": np.array([1], np.int64)}
    ours = run_lite(_session(to_graph(model)), feeds)["y"]
    expected = run_ort(model, feeds)["y"]
    assert ours.shape == expected.shape == (1, 1)
    np.testing.assert_array_equal(ours, expected)


def test_unknown_pass_name_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown passes"):
        to_graph(small_cnn(), disabled_passes=["fuse_everything"])


def _residual_block(conv_act: str | None = None, second_reader: bool = False, bias: bool = True,
                    residual_shape: tuple[int, ...] | None = None):
    """x -> Conv(3x3) [-> conv_act] -> Add(r) -> Relu, r = Conv1x1(x), or a constant of `residual_shape` (which
    no conv makes); `second_reader`: the conv output is also a graph output."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])
    consts = {"w": rng.standard_normal((8, 4, 3, 3)).astype(np.float32),
              "b": rng.standard_normal(8).astype(np.float32),
              "wr": rng.standard_normal((8, 4, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"] if bias else ["x", "w"], ["c"], pads=[1] * 4)]
    y = "c"
    if conv_act:
        nodes.append(helper.make_node(conv_act, ["c"], ["ca"]))
        y = "ca"
    if residual_shape is None:
        nodes.append(helper.make_node("Conv", ["x", "wr"], ["r"]))
    else:
        consts["r"] = rng.standard_normal(residual_shape).astype(np.float32)
    nodes += [helper.make_node("Add", [y, "r"], ["s"]), helper.make_node("Relu", ["s"], ["out"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in (["out", y] if second_reader
                                                                                 else ["out"])]
    graph = helper.make_graph(nodes, "block", [x], outputs, [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _fused_convs(graph) -> list:
    return [n for n in graph.nodes if n.op == "Conv2D" and len(n.inputs) == 4]


@pytest.mark.parametrize("bias", [True, False])
def test_fuse_residual_folds_the_add_and_its_relu_into_the_conv(bias: bool) -> None:
    model = _residual_block(bias=bias, residual_shape=(1, 8, 6, 6))
    graph = to_graph(model)
    assert "Add" not in _ops(graph)
    (conv,) = _fused_convs(graph)
    assert conv.attrs["activation"] == fb.ActivationType.RELU
    assert conv.inputs[2] if bias else conv.inputs[2] == ""   # a bias-less conv's bias slot stays empty
    x = np.random.default_rng(1).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run_lite(_session(graph), {"x": x})["out"], run_ort(model, {"x": x})["out"],
                               rtol=1e-5, atol=1e-5)
    assert "Add" in _ops(to_graph(model, disabled_passes=["fuse_residual"]))
    from converter.passes.fuse_residual import split_residuals
    split_residuals(graph)
    assert len(conv.inputs) == (3 if bias else 2)          # split back to the inputs it had


@pytest.mark.parametrize("kind", ["conv activation", "second reader", "broadcast"])
def test_fuse_residual_leaves_sums_it_cannot_take(kind: str) -> None:
    """The sum must come before any activation, the conv's output must have no other reader, and the residual
    must be the output's shape (no broadcasting); the other operand is a constant, which no conv could take."""
    model = _residual_block(conv_act="Relu" if kind == "conv activation" else None,
                            second_reader=kind == "second reader",
                            residual_shape=(1, 8, 1, 6) if kind == "broadcast" else (1, 8, 6, 6))
    graph = to_graph(model)
    assert "Add" in _ops(graph) and not _fused_convs(graph)


def test_quantization_splits_fused_residuals_back_into_adds() -> None:
    """The quantizer calibrates the conv's own output and gives the sum int8 parameters of its own."""
    from converter.passes.fuse_residual import split_residuals
    graph = to_graph(_residual_block())
    split_residuals(graph)
    assert not _fused_convs(graph)
    add = next(n for n in graph.nodes if n.op == "Add")
    assert add.attrs["activation"] == fb.ActivationType.RELU
    assert graph.producer(add.inputs[0]).attrs["activation"] == 0
    x = np.random.default_rng(2).standard_normal((1, 4, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run_lite(_session(graph), {"x": x})["out"],
                               run_ort(_residual_block(), {"x": x})["out"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tool", ["correct_biases", "adaround_weights"])
def test_layer_tools_refuse_a_float_graph_with_fused_residuals(tool: str) -> None:
    """Bias correction and AdaRound compare each layer's own output with the float graph's: a fused conv's output
    is the residual sum, so a float graph not split back is refused by name, not silently mismatched."""
    import copy

    from converter.passes.fuse_residual import split_residuals
    from converter.quant import QuantConfig, quantize
    from converter.quant.adaround import adaround_weights
    from converter.quant.bias_correction import correct_biases
    fused = to_graph(_residual_block())
    (conv,) = _fused_convs(fused)
    samples = [{"x": np.random.default_rng(3).standard_normal((1, 4, 6, 6)).astype(np.float32)}]
    qgraph = quantize(copy.deepcopy(fused), QuantConfig(preset="MINDSPORE_LITE"), samples)
    run = {"correct_biases": correct_biases, "adaround_weights": adaround_weights}[tool]
    with pytest.raises(ValueError, match=f"node '{conv.name}' carries a fused residual sum"):
        run(fused, qgraph, samples)
    run(split_residuals(copy.deepcopy(fused)), qgraph, samples)


def test_a_residual_input_of_another_shape_is_refused_naming_the_node() -> None:
    """A file whose fused conv reads a residual that is not its output's shape nor that shape with fewer channels
    (a hand-edited or foreign file: the pass never writes one) fails to compile with the node's name, instead of
    broadcasting or reading past it."""
    graph = to_graph(_residual_block(residual_shape=(1, 8, 6, 6)))
    (conv,) = _fused_convs(graph)
    conv.inputs[3] = graph.add_const(np.ones((1, 6, 6, 12), np.float32), "wrong_residual")
    with pytest.raises(lite.LiteError, match=f"Conv2D node '{conv.name}': residual input must be float32"):
        _session(graph)


def test_to_nhwc_keeps_a_moved_nodes_quant_type_and_rounding() -> None:
    """A node moved past a Transpose keeps its requantization rule and quant type (an int8 node of an
    onnxruntime-quantized model must not fall back to TFLite's rounding)."""
    from converter.ir import Graph, Node, Value
    from converter.passes.to_nhwc import _rewrite
    graph = Graph()
    graph.values["x"] = Value("x", (1, 2, 3, 4), np.dtype(np.float32))
    graph.values["y"] = Value("y", (1, 2, 3, 4), np.dtype(np.float32))
    node = Node("Abs", "abs", ["x"], ["y"], quant_type=fb.QuantType.DYNAMIC, rounding="onnxruntime")
    graph.nodes.append(node)
    _rewrite(graph, node, ["x"], {}, (0, 1, 2, 3))
    moved = next(n for n in graph.nodes if n.op == "Abs")
    assert (moved.quant_type, moved.rounding) == (fb.QuantType.DYNAMIC, "onnxruntime")
