"""MindSpore Lite's own `.ms` files (MSL2): the official 2.0.0 converter's files run in our runtime with the
official runtime's outputs; malformed ones are refused with a LiteError; our schema's readers are current."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

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
# NonMaxSuppressionKernel.select(boxes, scores) shadows the Kernel.select(inputs) step the compiler now calls
MARKS["tiny_yolo"] = pytest.mark.xfail(strict=True, raises=lite.status.InferShapeError,
                                       reason="NonMaxSuppressionKernel.select clashes with Kernel.select")
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
    with pytest.raises(NotSupportedError, match=r"node '/Flatten'.*Erf"):
        lite.Model.Import(_retyped(buf, "/Flatten", fb.PrimitiveType.Erf))
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


def test_mutated_official_files_raise_only_lite_errors(official_files) -> None:
    """Truncations, random bytes and overwritten runs in the structure of an official file: imported and
    compiled, each either works or raises a LiteError."""
    buf = official_files("lenet5", "NHWC").read_bytes()
    where = _structure(buf)
    rng = np.random.default_rng(41)
    refused = 0
    for k in range(MUTATIONS):
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
    assert refused >= MUTATIONS // 3      # every truncation at least is refused


def test_official_weight_quant_file_decodes_within_half_a_quantum(official_files) -> None:
    """Each int8 weight of the official 8-bit weight-quant MobileNetV2, decoded by our reader (channel axis,
    scale, zero point), is within half a quantum of the same weight in the official float file."""
    floats = {t.name: t.data for t in lite.Model.Load(official_files("mobilenet_v2", "NHWC")).tensors if t.is_const}
    quantized = [t for t in lite.Model.Load(official_files("mobilenet_v2", "NHWC", 8)).tensors
                 if t.is_const and t.quant_params]
    assert len(quantized) > 30
    for t in quantized:
        shape = [1] * t.data.ndim
        shape[t.quant_axis] = -1
        scale = np.array([q.scale for q in t.quant_params]).reshape(shape)
        zero = np.array([q.zeroPoint for q in t.quant_params]).reshape(shape)
        assert np.abs((t.data - zero) * scale - floats[t.name]).max() <= 0.5001 * scale.max(), t.name


@pytest.mark.parametrize("name", ["lenet5", "mobilenet_v2"])
def test_official_weight_quant_file_runs_near_the_float_model(official_files, name: str) -> None:
    """The official 8-bit weight-quant file (which the official 2.0.0 runtime itself cannot load) runs in ours
    within the quantization error of the official float file in the official runtime (measured: LeNet 0.4 %,
    random-weight MobileNetV2 5.2 % of the output range)."""
    x = np.random.default_rng(7).standard_normal(SHAPES[name]).astype(np.float32).transpose(0, 2, 3, 1).copy()
    assert_close(run_ours(official_files(name, "NHWC", 8), x), official.run(official_files(name, "NHWC"), x), 0.1)
