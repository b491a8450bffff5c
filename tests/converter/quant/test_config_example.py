"""examples/ptq_config.cfg: the complete post-training quantization config shown to users. It names every key the
parser knows (so it cannot drift from converter/quant/config.py) and the converter accepts it as it stands."""
from __future__ import annotations

import configparser
import re
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from PIL import Image

import lite
from converter.cli import main as converter_lite
from converter.quant.config import METHOD_KEYS, OLD_KEYS, SECTIONS, load_config

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "ptq_config.cfg"


def test_the_example_shows_every_key_of_every_section():
    """Set, or (the method keys, which the preset fills when left out) commented out as `#key=value`."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str
    parser.read_string(re.sub(r"(?m)^#(\w+=)", r"\1", EXAMPLE.read_text()))
    assert {s: tuple(parser[s]) for s in parser.sections()} == SECTIONS
    commented = set(re.findall(r"(?m)^#(\w+)=", EXAMPLE.read_text()))
    assert commented == set(METHOD_KEYS)


def test_the_example_names_the_keys_of_the_older_form():
    comments = " ".join(line for line in EXAMPLE.read_text().splitlines() if line.startswith("#"))
    assert [key for key in OLD_KEYS if key not in comments] == []


def image_model() -> onnx.ModelProto:
    """input [1, 3, 224, 224] -> Conv 3x3/2 -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> logits [1, 5]."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.2, name)
             for name, shape in (("w", (8, 3, 3, 3)), ("b", (8,)), ("fc_w", (5, 8)), ("fc_b", (5,)))]
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "image", [helper.make_tensor_value_info("input", TensorProto.FLOAT,
                                                                             [1, 3, 224, 224])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 5])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_the_converter_quantizes_with_the_example_as_it_stands(tmp_path: Path):
    config = tmp_path / EXAMPLE.name
    shutil.copy(EXAMPLE, config)
    photos = tmp_path / "calibration_images"
    photos.mkdir()
    rng = np.random.default_rng(1)
    for k in range(3):
        Image.fromarray(rng.integers(0, 256, (180, 260, 3), dtype=np.uint8)).save(photos / f"photo_{k}.png")
    parsed = load_config(config)
    assert parsed.input_type == "IMAGE" and parsed.calibrate_path == {"input": str(photos)}
    onnx.save(image_model(), tmp_path / "image.onnx")
    assert converter_lite(["--fmk=ONNX", f"--modelFile={tmp_path / 'image.onnx'}", f"--outputFile={tmp_path / 'q'}",
                           "--quantType=PostTraining", f"--configFile={config}"]) == 0
    session = lite.LiteSession.CreateSession(lite.Context(thread_num=1))
    session.CompileGraph(lite.Model.Load(tmp_path / "q.ms"))
    session.GetInputs()[0].set_data(np.zeros((1, 3, 224, 224), np.float32))
    computed: set[np.dtype] = set()
    assert session.RunGraph(after=lambda _i, outs, _p: computed.update(t.MutableData().dtype for t in outs)
                            or True) == lite.RET_OK
    assert np.dtype(np.int8) in computed                              # the layers run in int8
