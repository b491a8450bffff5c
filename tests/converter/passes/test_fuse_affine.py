"""fuse_affine: a constant per-channel Mul or Add after a dense layer or conv becomes part of the layer's weight and
bias; and fuse_activation's hard-swish spelled out in basic ops. Checked against onnxruntime on the source model;
nodes they cannot take stay."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import to_graph
from converter.export import to_bytes
from tests.util import run_lite, run_ort


def _dense(bias_shape: tuple[int, ...], bias_first: bool, residual: bool = False, second_reader: bool = False):
    """x [2, 5, 8] @ W [8, 6] + c (+ x @ R, a residual computed at run time), in PyTorch's export order when
    `bias_first`."""
    rng = np.random.default_rng(0)
    consts = {"w": rng.standard_normal((8, 6)).astype(np.float32),
              "c": rng.standard_normal(bias_shape).astype(np.float32),
              "r": rng.standard_normal((8, 6)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]),
             helper.make_node("Add", ["c", "mm"] if bias_first else ["mm", "c"], ["biased"])]
    outputs = ["biased"]
    if residual:
        nodes += [helper.make_node("MatMul", ["x", "r"], ["skip"]),
                  helper.make_node("Add", ["biased", "skip"], ["sum"])]
        outputs = ["sum"]
    if second_reader:
        outputs.append("mm")
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5, 8])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


def _check(model, graph, shape: tuple[int, ...] = (2, 5, 8)) -> None:
    buf = to_bytes(graph)
    session = lite.LiteSession.CreateSession(buf, len(buf), lite.Context())
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got, want = run_lite(session, {"x": x}), run_ort(model, {"x": x})
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("bias_shape", [(6,), (1, 1, 6), (1,)])
@pytest.mark.parametrize("bias_first", [True, False])
def test_a_per_channel_add_becomes_the_dense_layers_bias(bias_shape: tuple[int, ...], bias_first: bool) -> None:
    model = _dense(bias_shape, bias_first)
    graph = to_graph(model)
    assert [n.op for n in graph.nodes] == ["FullConnection"]
    assert len(graph.nodes[0].inputs) == 3
    assert "Add" in [n.op for n in to_graph(model, disabled_passes=["fuse_affine"]).nodes]
    _check(model, graph)


def test_the_residual_sum_after_the_bias_fuses_too() -> None:
    """With its bias inside, the layer's output is the residual Add's operand, which `fuse_residual` takes."""
    model = _dense((6,), True, residual=True)
    graph = to_graph(model)
    assert "Add" not in [n.op for n in graph.nodes]
    _check(model, graph)


@pytest.mark.parametrize("kind", ["full-shape constant", "broadcast to more rows", "second reader"])
def test_adds_it_cannot_take_stay(kind: str) -> None:
    """A constant that differs per row is no bias, one that grows the output's shape broadcasts it, and a
    product read elsewhere must stay without the bias."""
    shape = {"full-shape constant": (5, 6), "broadcast to more rows": (3, 1, 1, 6)}.get(kind, (6,))
    model = _dense(shape, False, second_reader=kind == "second reader")
    graph = to_graph(model)
    assert "Add" in [n.op for n in graph.nodes]
    _check(model, graph)


def _conv_block(hard_swish: str):
    """Conv -> Mul(s) -> Add(b) (PaddleOCR's learnable affine after a conv) -> hard-swish spelled out
    (`hard_swish`: "div" x * relu6(x + 3) / 6 with Clip, "mul" the same times 1/6)."""
    rng = np.random.default_rng(0)
    consts = {"w": rng.standard_normal((8, 4, 3, 3)).astype(np.float32),
              "wb": rng.standard_normal(8).astype(np.float32),
              "s": np.array([[[[1.7]]]], np.float32), "b": rng.standard_normal((1, 8, 1, 1)).astype(np.float32),
              "three": np.array(3.0, np.float32), "zero": np.array(0.0, np.float32), "six": np.array(6.0, np.float32),
              "sixth": np.array(1 / 6, np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "wb"], ["conv"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", ["s", "conv"], ["scaled"]), helper.make_node("Add", ["scaled", "b"], ["a"]),
             helper.make_node("Add", ["a", "three"], ["shifted"]),
             helper.make_node("Clip", ["shifted", "zero", "six"], ["gate"]),
             helper.make_node("Mul", ["a", "gate"], ["product"]),
             helper.make_node("Div", ["product", "six"], ["out"]) if hard_swish == "div"
             else helper.make_node("Mul", ["sixth", "product"], ["out"])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])


@pytest.mark.parametrize("hard_swish", ["div", "mul"])
def test_a_conv_takes_its_scale_shift_and_spelled_out_hard_swish(hard_swish: str) -> None:
    from schema import fb
    model = _conv_block(hard_swish)
    graph = to_graph(model)
    convs = [n for n in graph.nodes if n.op == "Conv2D"]
    assert len(convs) == 1 and not any(n.op in ("Mul", "Add", "Div") for n in graph.nodes)
    assert convs[0].attrs["activation"] == fb.ActivationType.HSWISH
    _check(model, graph, (1, 4, 6, 6))


def _scaled_input(layer: str, pads: int = 0):
    """x -> Relu -> Mul(s) -> Add(c) -> layer: a scale and shift of the layer's input channels ("dense": a
    FullConnection; "conv": a 3x3 conv with `pads`; "depthwise": a 3x3 depthwise conv with `pads`; both after a
    1x1 conv, so the chain runs in NHWC)."""
    rng = np.random.default_rng(0)
    channels = 4
    shape = [2, 5, channels] if layer == "dense" else [1, channels, 6, 6]
    per_channel = (channels,) if layer == "dense" else (1, channels, 1, 1)
    weight = {"dense": (channels, 3), "conv": (6, channels, 3, 3), "depthwise": (channels, 1, 3, 3)}[layer]
    consts = {"s": rng.uniform(0.5, 2, per_channel).astype(np.float32), "c": np.array(0.7, np.float32),
              "w": rng.standard_normal(weight).astype(np.float32),
              "b": rng.standard_normal(3 if layer == "dense" else weight[0]).astype(np.float32),
              "w0": rng.standard_normal((channels, channels, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("Identity" if layer == "dense" else "Conv", ["x"] if layer == "dense" else ["x", "w0"],
                              ["x0"]),
             helper.make_node("Relu", ["x0"], ["r"]), helper.make_node("Mul", ["r", "s"], ["scaled"]),
             helper.make_node("Add", ["c", "scaled"], ["shifted"])]
    if layer == "dense":
        nodes += [helper.make_node("MatMul", ["shifted", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["out"])]
    else:
        nodes.append(helper.make_node("Conv", ["shifted", "w", "b"], ["out"], pads=[pads] * 4,
                                      group=channels if layer == "depthwise" else 1))
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), tuple(shape)


@pytest.mark.parametrize("layer, pads", [("dense", 0), ("conv", 0), ("depthwise", 0), ("conv", 1),
                                         ("depthwise", 1)])
def test_a_scale_and_shift_of_the_input_fold_into_the_next_layer(layer: str, pads: int) -> None:
    """Both fold into a layer that never pads; a padding layer takes neither (its border reads zeros, not the
    shift, and the scale would have to pass the shift first)."""
    model, shape = _scaled_input(layer, pads)
    graph = to_graph(model)
    ops = [n.op for n in graph.nodes]
    assert ("Mul" in ops) == ("Add" in ops) == bool(pads)
    _check(model, graph, shape)
