"""Bad input gets a LiteError with the documented status and a message naming the culprit — never a crash."""
from __future__ import annotations

import os

import numpy as np
import pytest
import onnx
from onnx import TensorProto, helper, numpy_helper

import lite
from converter import convert
from converter.export import to_bytes
from converter.ir import Graph, Node, Value
from tests.util import session_for, small_cnn


@pytest.fixture(scope="module")
def model_bytes() -> bytes:
    return convert(small_cnn())


def _import(buf: bytes) -> lite.LiteSession:
    return lite.LiteSession.CreateSession(buf, len(buf), lite.Context())


def test_truncated_file_is_a_graph_file_error(model_bytes: bytes) -> None:
    with pytest.raises(lite.GraphFileError) as e:
        _import(model_bytes[: len(model_bytes) // 2])
    assert e.value.status == lite.RET_GRAPH_FILE_ERR
    assert "runs past the end" in str(e.value) or "malformed" in str(e.value)


def test_random_bytes_are_rejected_by_identifier() -> None:
    with pytest.raises(lite.GraphFileError, match="file identifier") as e:
        _import(np.random.default_rng(0).bytes(4096))
    assert e.value.status == lite.RET_GRAPH_FILE_ERR


def test_tiny_and_empty_buffers(tmp_path) -> None:
    with pytest.raises(lite.GraphFileError, match="too small"):
        _import(b"\x00\x01")
    empty = tmp_path / "empty.ms"
    empty.write_bytes(b"")
    with pytest.raises(lite.GraphFileError, match="empty"):
        lite.Model.Load(empty)
    with pytest.raises(lite.GraphFileError, match="cannot read"):
        lite.Model.Load(tmp_path / "missing.ms")


def test_size_larger_than_buffer(model_bytes: bytes) -> None:
    with pytest.raises(lite.GraphFileError, match="does not fit"):
        lite.Model.Import(model_bytes, len(model_bytes) + 1)


@pytest.mark.parametrize("seed", range(4))
def test_corrupted_files_raise_only_lite_errors(model_bytes: bytes, seed: int) -> None:
    """Byte flips and truncations anywhere: the session either works or raises a LiteError."""
    rng = np.random.default_rng(seed)
    for _ in range(150):
        buf = bytearray(model_bytes)
        if rng.random() < 0.3:
            buf = buf[: int(rng.integers(0, len(buf)))]
        for pos in rng.integers(0, max(len(buf), 1), size=int(rng.integers(1, 8))):
            if pos < len(buf):
                buf[pos] = int(rng.integers(0, 256))
        try:
            session = _import(bytes(buf))
            if session.arena_bytes < 1 << 26:     # a flipped dim can ask for gigabytes: planned, not run
                session.RunGraph()
        except lite.LiteError as e:
            assert e.status < 0 and str(e)


def test_unsupported_onnx_op_names_op_node_and_opset() -> None:
    data = helper.make_tensor_value_info("data", TensorProto.UINT8, [100])
    image = helper.make_tensor_value_info("image", TensorProto.UINT8, None)
    node = helper.make_node("ImageDecoder", ["data"], ["image"], name="model/decode")
    model = helper.make_model(helper.make_graph([node], "g", [data], [image]),
                              opset_imports=[helper.make_opsetid("", 20)])
    with pytest.raises(lite.NotSupportedError) as e:
        convert(model)
    assert e.value.status == lite.RET_NOT_SUPPORT
    assert "'ImageDecoder'" in str(e.value) and "'model/decode'" in str(e.value) and "opset 20" in str(e.value)


def test_op_without_kernel_for_its_dtype_names_the_node() -> None:
    g = Graph("int_conv")
    g.values["x"] = Value("x", (1, 4, 4, 2), np.dtype(np.int32))
    g.values["w"] = Value("w", (2, 1, 1, 2), np.dtype(np.int32), np.ones((2, 1, 1, 2), np.int32))
    g.values["y"] = Value("y", (1, 4, 4, 2), np.dtype(np.int32))
    g.inputs, g.outputs = ["x"], ["y"]
    g.nodes.append(Node("Conv2D", "int_conv", ["x", "w"], ["y"], {"kernel_h": 1, "kernel_w": 1,
                                                                  "in_channel": 2, "out_channel": 2}))
    buf = to_bytes(g)
    with pytest.raises(lite.NotSupportedError, match="Conv2D node 'int_conv'") as e:
        _import(buf)
    assert e.value.status == lite.RET_NOT_SUPPORT


def test_wrong_input_shape_names_the_tensor() -> None:
    session = session_for(small_cnn())
    with pytest.raises(lite.InputTensorError, match="'input'.*shape") as e:
        session.GetInputs()[0].set_data(np.zeros((1, 3, 9, 9), np.float32))
    assert e.value.status == lite.RET_INPUT_TENSOR_ERROR


def test_wrong_input_dtype_names_the_tensor() -> None:
    session = session_for(small_cnn())
    with pytest.raises(lite.InputTensorError, match="'input'.*float32.*float64") as e:
        session.GetInputs()[0].set_data(np.zeros((1, 3, 8, 8), np.float64))
    assert e.value.status == lite.RET_INPUT_TENSOR_ERROR


def test_resize_errors_leave_the_session_usable() -> None:
    session = session_for(small_cnn())
    inp = session.GetInputs()[0]
    with pytest.raises(lite.InputTensorError, match="same rank"):
        session.Resize([inp], [[1, 3, 8]])
    with pytest.raises(lite.InputTensorError, match="not an input"):
        session.Resize([session.GetOutputByTensorName("logits")], [[2, 4]])
    with pytest.raises(lite.InferShapeError) as e:
        session.Resize([inp], [[1, 5, 8, 8]])       # 5 channels into a 3-channel conv
    assert e.value.status == lite.RET_INFER_ERR and "conv1" in str(e.value)
    inp.set_data(np.ones((1, 3, 8, 8), np.float32))
    assert session.RunGraph() == lite.RET_OK


def test_compile_graph_needs_a_model() -> None:
    session = lite.LiteSession.CreateSession(lite.Context())
    with pytest.raises(lite.ParamInvalidError):
        session.CompileGraph(b"not a model")
    with pytest.raises(lite.ParamInvalidError, match="CompileGraph first"):
        session.GetInputs()


def test_nonexistent_onnx_file(tmp_path) -> None:
    from converter import convert_file
    with pytest.raises(lite.GraphFileError, match="does not exist"):
        convert_file(tmp_path / "nope.onnx", tmp_path / "out")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(os.urandom(100))
    with pytest.raises(lite.GraphFileError, match="not a readable ONNX model"):
        convert_file(junk, tmp_path / "out")


def test_opset_older_than_7_imports_when_its_ops_are_unchanged() -> None:
    """An opset-1 model whose ops ONNX has not redefined since (Not) reads as opset 7; one whose ops changed
    (Relu dropped `consumed_inputs` in opset 6) is refused, naming them."""
    def opset_1(op: str, dtype: int) -> onnx.ModelProto:
        io = [helper.make_tensor_value_info(n, dtype, [2]) for n in "xy"]
        graph = helper.make_graph([helper.make_node(op, ["x"], ["y"])], "g", io[:1], io[1:])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)])
    session = session_for(opset_1("Not", TensorProto.BOOL))
    session.GetInputs()[0].set_data(np.array([True, False]))
    session.RunGraph()
    np.testing.assert_array_equal(session.GetOutputByTensorName("y").numpy(), [False, True])
    with pytest.raises(lite.NotSupportedError, match="opset 1 .* definition of Relu differs") as e:
        convert(opset_1("Relu", TensorProto.FLOAT))
    assert e.value.status == lite.RET_NOT_SUPPORT


# ---- the op contract: a named status and the node's name, at compile time where the value is known then --------
def _node_model(op: str, inputs: dict[str, tuple[int, list[int]]], outputs: dict[str, int],
                consts: dict[str, np.ndarray] | None = None, **attrs) -> onnx.ModelProto:
    """One `op` node named 'my_node' over graph inputs and initializers, input order: inputs, then consts."""
    consts = consts or {}
    node = helper.make_node(op, [*inputs, *consts], list(outputs), name="my_node", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, t, s) for n, (t, s) in inputs.items()],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
                              [numpy_helper.from_array(v, n) for n, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


F, I64 = TensorProto.FLOAT, TensorProto.INT64
X = {"x": (F, [3, 4])}
GATHERED = {"x": (F, [3, 4]), "i": (I64, [1])}
TOPK = {"x": (F, [3, 4]), "k": (I64, [1])}
RANGE = {"s": (I64, []), "l": (I64, []), "d": (I64, [])}
COMPILE_TIME = {   # case: (model, status, message part)
    "softmax_axis": (_node_model("Softmax", X, {"y": F}, axis=2), lite.RET_INVALID_OP_ATTR, "axis 2 is out of range"),
    "flatten_axis": (_node_model("Flatten", X, {"y": F}, axis=3), lite.RET_INVALID_OP_ATTR, "axis 3 is out of range"),
    "gather_axis": (_node_model("Gather", X, {"y": F}, {"i": np.array([0])}, axis=-3), lite.RET_INVALID_OP_ATTR,
                    "axis -3 is out of range"),
    "argmax_axis": (_node_model("ArgMax", X, {"y": I64}, axis=2), lite.RET_INVALID_OP_ATTR, "axis 2 is out of range"),
    "depth_to_space_blocksize": (_node_model("DepthToSpace", {"x": (F, [1, 4, 2, 2])}, {"y": F}, blocksize=0),
                                 lite.RET_INVALID_OP_ATTR, "blocksize must be >= 1"),
    "gather_index": (_node_model("Gather", X, {"y": F}, {"i": np.array([3])}), lite.RET_INFER_ERR,
                     "index 3 is out of range"),
    "gather_nd_index": (_node_model("GatherND", X, {"y": F}, {"i": np.array([[0, 4]])}), lite.RET_INFER_ERR,
                        "index 4 is out of range"),
    "scatter_nd_index": (_node_model("ScatterND", X, {"y": F}, {"i": np.array([[3, 0]]), "u": np.ones(1, np.float32)}),
                         lite.RET_INFER_ERR, "index 3 is out of range"),
    "top_k_larger_than_axis": (_node_model("TopK", X, {"v": F, "j": I64}, {"k": np.array([5])}), lite.RET_INFER_ERR,
                               "k = 5 is outside [0, 4]"),
}
RUN_TIME = {       # case: (model, feeds, status, message part)
    "cumsum_axis": (_node_model("CumSum", {"x": (F, [3, 4]), "a": (I64, [])}, {"y": F}),
                    {"a": np.array(5)}, lite.RET_INVALID_OP_ATTR, "axis 5 is out of range"),
    "gather_index": (_node_model("Gather", GATHERED, {"y": F}), {"i": np.array([-4])}, lite.RET_OP_EXECUTE_FAILURE,
                     "index -4 is out of bounds"),
    "top_k_larger_than_axis": (_node_model("TopK", TOPK, {"v": F, "j": I64}), {"k": np.array([5])},
                               lite.RET_INFER_ERR, "k = 5 is outside [0, 4]"),
    "top_k_negative": (_node_model("TopK", TOPK, {"v": F, "j": I64}), {"k": np.array([-1])}, lite.RET_INFER_ERR,
                       "k = -1 is outside"),
    "range_zero_delta": (_node_model("Range", RANGE, {"y": I64}), {"s": np.array(0), "l": np.array(5),
                                                                    "d": np.array(0)}, lite.RET_INFER_ERR, "delta is zero"),
    "range_too_long": (_node_model("Range", RANGE, {"y": I64}), {"s": np.array(0), "l": np.array(1 << 40),
                                                                  "d": np.array(1)}, lite.RET_INFER_ERR, "is too many"),
}


@pytest.mark.parametrize("case", COMPILE_TIME)
def test_bad_constant_parameter_fails_conversion_naming_the_node(case: str) -> None:
    model, status, text = COMPILE_TIME[case]
    with pytest.raises(lite.LiteError) as e:
        session_for(model)
    assert e.value.status == status and text in str(e.value) and "'my_node'" in str(e.value), str(e.value)


@pytest.mark.parametrize("case", RUN_TIME)
def test_bad_run_time_parameter_fails_the_run_naming_the_node(case: str) -> None:
    model, feeds, status, text = RUN_TIME[case]
    session = session_for(model)
    for t in session.GetInputs():
        t.set_data(feeds.get(t.tensor_name(), np.ones(t.shape(), np.float32)))
    with pytest.raises(lite.LiteError) as e:
        session.RunGraph()
    assert e.value.status == status and text in str(e.value) and "'my_node'" in str(e.value), str(e.value)


def test_negative_range_count_is_empty_as_onnx_defines_it() -> None:
    """max(ceil((limit - start) / delta), 0) entries: a limit behind the start is no error (onnxruntime agrees)."""
    from tests.util import run_ort
    model = _node_model("Range", RANGE, {"y": I64})
    feeds = {"s": np.array(5), "l": np.array(0), "d": np.array(1)}
    session = session_for(model)
    for t in session.GetInputs():
        t.set_data(feeds[t.tensor_name()])
    session.RunGraph()
    got = session.GetOutputByTensorName("y").numpy()
    assert got.shape == run_ort(model, feeds)["y"].shape == (0,)
