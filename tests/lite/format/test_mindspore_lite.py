"""MindSpore Lite's own `.ms` files (MSL2): the official 2.0.0 converter's files run in our runtime with the
official runtime's outputs; malformed ones are refused with a LiteError; our schema's readers are current."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

import lite
import models
from lite.status import GraphFileError, LiteError, NotSupportedError
from schema.mindspore_lite import fb, regenerate
from tests.oracles import mindspore_lite as official

SHAPES = {"lenet5": (1, 1, 32, 32), "mobilenet_v2": (1, 3, 224, 224), "resnet18": (1, 3, 224, 224),
          "alexnet": (1, 3, 224, 224), "mobilenet_v3_small": (1, 3, 224, 224), "resnet50": (1, 3, 224, 224),
          "efficientnet_lite0": (1, 3, 224, 224), "crnn": (1, 1, 32, 64), "kws_lstm": (1, 49, 40),
          "tiny_unet": (1, 3, 32, 32), "tiny_yolo": (1, 3, 64, 64)}
# the zoo models' ONNX input shapes
MARKS = {name: pytest.mark.slow for name in ("resnet50", "efficientnet_lite0", "alexnet")}
MUTATIONS = 300


def test_generated_readers_are_current(tmp_path: Path) -> None:
    assert regenerate.generate(tmp_path).read_text() == regenerate.GENERATED.read_text(), \
        "run `python -m schema.mindspore_lite.regenerate`"


def test_primitive_numbers_are_the_official_ones() -> None:
    """Spot checks of the union order against the codes the official 2.0.0 converter writes (the bytes depend on
    it): AvgPoolFusion 17, Conv2DFusion 35, Flatten 61, MatMulFusion 89, Transpose 162 in its LeNet file."""
    codes = fb.PrimitiveType
    assert (codes.AvgPoolFusion, codes.Conv2DFusion, codes.Flatten, codes.MatMulFusion, codes.Transpose) == \
        (17, 35, 61, 89, 162)
    assert (codes.AdamWeightDecay, codes.FillV2) == (220, 221)


@pytest.fixture(scope="module")
def official_files(tmp_path_factory: pytest.TempPathFactory):
    """(zoo name, input layout, weight bits or 0) -> the official converter's .ms of the zoo model (cached across
    runs)."""
    official.require()
    folder = tmp_path_factory.mktemp("onnx")
    made: dict[tuple[str, str, int], Path] = {}

    def get(name: str, layout: str, weight_bits: int = 0) -> Path:
        if (name, layout, weight_bits) not in made:
            onnx_path = folder / f"{name}.onnx"
            if not onnx_path.exists():
                models.save(models.build(name), onnx_path)
            made[name, layout, weight_bits] = official.convert(onnx_path, "input", SHAPES[name], layout,
                                                               weight_bits)
        return made[name, layout, weight_bits]
    return get


def run_ours(path: Path, x: np.ndarray) -> list[np.ndarray]:
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=2))
    session.CompileGraph(lite.Model.Load(path))
    [given] = session.GetInputs()
    assert tuple(given.shape()) == x.shape
    given.set_data(x)
    session.RunGraph()
    return [out.numpy().copy() for out in session.GetOutputs().values()]


def assert_close(got: list[np.ndarray], raw: bytes, tolerance: float) -> None:
    """Each output within `tolerance` of its range in the official outputs `raw` (integer outputs equal)."""
    for ours, theirs in zip(got, official.as_arrays(raw, got), strict=True):
        if ours.dtype.kind != "f":
            np.testing.assert_array_equal(ours, theirs)
            continue
        span = float(theirs.max() - theirs.min())
        assert span > 0
        assert np.abs(ours - theirs).max() <= tolerance * span


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARKS[n]) if n in MARKS else n for n in SHAPES])
def test_official_file_matches_official_runtime(official_files, name: str, layout: str) -> None:
    path = official_files(name, layout)
    x = np.random.default_rng(7).standard_normal(SHAPES[name]).astype(np.float32)
    if layout == "NHWC" and x.ndim == 4:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert_close(run_ours(path, x), official.run(path, x), 1e-4)


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_official_file_runs_the_nodes_of_our_own_conversion(official_files, name: str) -> None:
    """From NCHW, the official converter leaves each residual Add between Transposes to NCHW and back; read, the
    pairs cancel and the Adds fold into the convolutions, so the official file runs the nodes ours does (where
    ours turns the Transpose of a 1x1 map into a Reshape)."""
    from collections import Counter
    from converter import convert

    def kinds(model: lite.Model) -> Counter:
        return Counter("Transpose" if n.op == "Reshape" else n.op for n in model.nodes)
    path = official_files(name, "NCHW")
    theirs = lite.Model.Load(path)
    assert fb.MetaGraph.GetRootAs(path.read_bytes(), 0).NodesLength() > len(theirs.nodes)     # as written
    assert kinds(theirs) == kinds(lite.Model.Import(convert(models.build(name))))


def test_official_text_encoder_matches_official_runtime(tmp_path: Path) -> None:
    """A transformer text encoder (embedding Gather, attention MatMuls, Softmax, LayerNormFusion, GELU) on int32
    tokens, as the official converter turns its int64 ONNX input into."""
    official.require()
    from models import text
    onnx.save(text.text_encoder(batch=1)[1], tmp_path / "text.onnx")
    path = official.convert(tmp_path / "text.onnx", "tokens", (1, 16))
    tokens = np.random.default_rng(3).integers(0, 50, (1, 16)).astype(np.int32)
    assert_close(run_ours(path, tokens), official.run(path, tokens), 1e-4)


def _op_cases() -> dict[str, tuple[list, dict[str, np.ndarray], int]]:
    """One-op (or few-op) ONNX graphs over a [1, 8, 16, 16] input whose official conversion exercises one
    MindSpore Lite primitive each: name -> (nodes, initializers, opset)."""
    rng = np.random.default_rng(5)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)     # noqa: E731
    i64 = lambda *values: np.array(values, np.int64)                   # noqa: E731
    n = helper.make_node
    pads = i64(0, 0, 1, 2, 0, 0, 2, 1)
    return {
        "avgpool_pad": ([n("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1] * 4, strides=[2, 2])], {}, 13),
        "maxpool_ceil": ([n("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)], {}, 13),
        "globalmaxpool": ([n("GlobalMaxPool", ["x"], ["y"])], {}, 13),
        "conv_same": ([n("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")],
                      {"w": f(6, 8, 3, 3)}, 13),
        # the 2.0.0 converter needs every ConvTranspose attribute spelled out; its runtime fails on grouped ones
        "conv_transpose": ([n("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], kernel_shape=[3, 3],
                              pads=[1] * 4, dilations=[1, 1], group=1, output_padding=[1, 1])],
                           {"w": f(8, 4, 3, 3), "b": f(4)}, 13),
        "batchnorm": ([n("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"])],
                      {"s": f(8), "b": f(8), "m": f(8), "v": np.abs(f(8)) + 0.5}, 13),
        "layernorm": ([n("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)], {"g": f(16), "b": f(16)}, 17),
        "prelu": ([n("PRelu", ["x", "s"], ["y"])], {"s": f(8, 1, 1)}, 13),
        "clip": ([n("Clip", ["x", "lo", "hi"], ["y"])],
                 {"lo": np.array(-0.5, np.float32), "hi": np.array(0.7, np.float32)}, 13),
        "leakyrelu": ([n("LeakyRelu", ["x"], ["y"], alpha=0.1)], {}, 13),
        "hardsigmoid": ([n("HardSigmoid", ["x"], ["y"], alpha=0.2, beta=0.5)], {}, 13),
        "sigmoid_tanh": ([n("Sigmoid", ["x"], ["a"]), n("Tanh", ["a"], ["y"])], {}, 13),
        "unary": ([n("Abs", ["x"], ["a"]), n("Sqrt", ["a"], ["b"]), n("Neg", ["b"], ["c"]), n("Erf", ["c"], ["d"]),
                   n("Exp", ["d"], ["e"]), n("Log", ["e"], ["y"])], {}, 13),
        "floor": ([n("Mul", ["x", "k"], ["a"]), n("Floor", ["a"], ["y"])], {"k": np.array(3.0, np.float32)}, 13),
        "pow": ([n("Abs", ["x"], ["a"]), n("Pow", ["a", "e"], ["y"])], {"e": np.array(1.5, np.float32)}, 13),
        "max_min": ([n("Max", ["x", "c"], ["a"]), n("Min", ["a", "d"], ["y"])], {"c": f(1, 8, 1, 1), "d": f(16, 16)},
                    13),
        "matmul": ([n("Transpose", ["x"], ["t"], perm=[0, 1, 3, 2]), n("MatMul", ["x", "t"], ["y"])], {}, 13),
        "softmax_channels": ([n("Softmax", ["x"], ["y"], axis=1)], {}, 13),
        "reducemean": ([n("ReduceMean", ["x"], ["y"], axes=[2, 3], keepdims=1)], {}, 13),
        "resize_nearest": ([n("Resize", ["x", "", "s"], ["y"], mode="nearest",
                              coordinate_transformation_mode="asymmetric", nearest_mode="floor")],
                           {"s": np.array([1, 1, 2, 2], np.float32)}, 13),
        "pad": ([n("Pad", ["x", "p"], ["y"], mode="constant")], {"p": pads}, 13),
        "pad_reflect": ([n("Pad", ["x", "p"], ["y"], mode="reflect")], {"p": pads}, 13),
        "split": ([n("Split", ["x", "s"], ["a", "b"], axis=1), n("Mul", ["a", "b"], ["y"])], {"s": i64(4, 4)}, 13),
        "slice": ([n("Slice", ["x", "s", "e", "a"], ["y"])], {"s": i64(1, 2), "e": i64(7, 14), "a": i64(1, 3)}, 13),
        "tile": ([n("Tile", ["x", "r"], ["y"])], {"r": i64(1, 1, 2, 1)}, 13),
    }


OP_CASES = _op_cases()


@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
@pytest.mark.parametrize("case", list(OP_CASES))
def test_official_primitive_matches_official_runtime(tmp_path: Path, case: str, layout: str) -> None:
    official.require()
    nodes, initializers, opset = OP_CASES[case]
    graph = helper.make_graph(nodes, case, [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(model), tmp_path / f"{case}.onnx")
    path = official.convert(tmp_path / f"{case}.onnx", "x", (1, 8, 16, 16), layout)
    x = np.random.default_rng(1).standard_normal((1, 8, 16, 16)).astype(np.float32)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    assert_close(run_ours(path, x), official.run(path, x), 1e-4)


def _retyped(buf: bytes, node_name: str, code: int) -> bytes:
    """`buf` with the primitive type of the node named `node_name` set to `code`."""
    root = fb.MetaGraph.GetRootAs(buf, 0)
    for k in range(root.NodesLength()):
        node = root.Nodes(k)
        if node.Name().decode() == node_name:
            primitive = node.Primitive()
            pos = primitive._tab.Pos + primitive._tab.Offset(4)       # the union's type field
            out = bytearray(buf)
            out[pos] = code
            return bytes(out)
    raise AssertionError(f"no node {node_name}")


def test_unsupported_and_unknown_primitives_are_named(official_files) -> None:
    buf = official_files("lenet5", "NHWC").read_bytes()
    with pytest.raises(NotSupportedError, match=r"node '/Flatten'.*Mfcc"):
        lite.Model.Import(_retyped(buf, "/Flatten", fb.PrimitiveType.Mfcc))
    with pytest.raises(GraphFileError, match="unknown type code 250"):
        lite.Model.Import(_retyped(buf, "/Flatten", 250))


def _structure(buf: bytes) -> np.ndarray:
    """Positions of `buf` outside the tensors' data: the tables, vtables, indices and strings (mutating weight
    bytes only changes numbers)."""
    root = fb.MetaGraph.GetRootAs(buf, 0)
    keep = np.ones(len(buf), bool)
    for i in range(root.AllTensorsLength()):
        t = root.AllTensors(i)
        if t.DataLength():
            start = t._tab.Vector(t._tab.Offset(16))      # Tensor.data, the 7th field
            keep[start:start + t.DataLength()] = False
    return np.flatnonzero(keep)


@pytest.mark.parametrize("name, layout", [("lenet5", "NHWC"), ("tiny_yolo", "NCHW")])
def test_mutated_official_files_raise_only_lite_errors(official_files, name: str, layout: str) -> None:
    """Of an official file (LeNet; tiny YOLO for its many primitives)."""
    assert_mutants_raise_only_lite_errors(official_files(name, layout).read_bytes(), MUTATIONS)


def assert_mutants_raise_only_lite_errors(buf: bytes, count: int) -> None:
    """Truncations, random bytes and overwritten runs in the structure of the MSL2 file `buf`: imported and
    compiled, each either works or raises a LiteError."""
    where = _structure(buf)
    rng = np.random.default_rng(41)
    refused = 0
    for k in range(count):
        data = bytearray(buf)
        kind = k % 3
        if kind == 0:
            data = data[:int(rng.integers(0, len(data)))]
        elif kind == 1:
            for pos in rng.choice(where, size=int(rng.integers(1, 5))):
                data[pos] = int(rng.integers(0, 256))
        else:
            start = int(rng.choice(where))
            data[start:start + 8] = rng.integers(0, 256, size=8, dtype=np.uint8).tobytes()
        try:
            session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
            session.CompileGraph(lite.Model.Import(bytes(data)))
        except LiteError:
            refused += 1
        except Exception as e:     # noqa: BLE001 - what the test is about
            pytest.fail(f"mutation {k} (kind {kind}) raised {type(e).__name__}: {e}")
    assert refused >= count // 3      # every truncation at least is refused


@pytest.mark.parametrize("bits", [4, 8, 16])
def test_official_weight_quant_file_decodes_within_half_a_quantum(official_files, bits: int) -> None:
    """Each integer weight of the official weight-quant MobileNetV2 (4 bits: bit-packed), decoded by our reader
    (packing, channel axis, scale, zero point), is within half a quantum of the same weight in the official float
    file (16 bits: plus the float weight's own rounding)."""
    floats = {t.name: t.data for t in lite.Model.Load(official_files("mobilenet_v2", "NHWC")).tensors if t.is_const}
    quantized = [t for t in lite.Model.Load(official_files("mobilenet_v2", "NHWC", bits)).tensors
                 if t.is_const and t.quant_params]
    assert len(quantized) > 30
    for t in quantized:
        shape = [1] * t.data.ndim
        shape[t.quant_axis] = -1
        scale = np.array([q.scale for q in t.quant_params]).reshape(shape)
        zero = np.array([q.zeroPoint for q in t.quant_params]).reshape(shape)
        assert np.abs((t.data - zero) * scale - floats[t.name]).max() <= 0.51 * scale.max(), t.name


@pytest.mark.parametrize("bits, tolerance", [(8, 0.1), (16, 1e-3)])
@pytest.mark.parametrize("name", ["lenet5", "mobilenet_v2"])
def test_official_weight_quant_file_runs_near_the_float_model(official_files, name: str, bits: int,
                                                              tolerance: float) -> None:
    """The official weight-quant file runs in ours within the quantization error of the official float file in
    the official runtime (measured, of the output range:
    8 bits LeNet 0.4 %, random-weight MobileNetV2 5.2 %; 16 bits 8.8e-6 and 2.5e-4)."""
    x = np.random.default_rng(7).standard_normal(SHAPES[name]).astype(np.float32).transpose(0, 2, 3, 1).copy()
    assert_close(run_ours(official_files(name, "NHWC", bits), x), official.run(official_files(name, "NHWC"), x),
                 tolerance)
