"""`lite.inspect`: the summary of a float, an int8, a weight-quantized and a training model, field by field against
what the source graph and an independently compiled session say."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import lite
import models
from converter import convert, convert_for_training, to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from converter.train import TrainParams
from lite.format import mspy
from lite.inspect import format_summary, graph_dot, graph_text, main, summarize
from lite.tools.benchmark import main as benchmark_lite
from schema import FORMAT_VERSION

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lenet() -> onnx.ModelProto:
    return models.build("lenet5")


def float_elements(model: onnx.ModelProto) -> int:
    return sum(numpy_helper.to_array(i).size for i in model.graph.initializer if i.data_type == onnx.TensorProto.FLOAT)


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_files_before_format_1_2_name_onnx_as_their_source(lenet, tmp_path: Path, monkeypatch) -> None:
    """Format 1.1 wrote fmk_type 0 for ONNX (TF's FmkType since 1.2): such files still read as ONNX."""
    monkeypatch.setattr(mspy.writer, "FORMAT_VERSION", "1.1")
    old = lite.Model.Load(write(tmp_path, "old.ms", to_bytes(to_graph(lenet), fmk_type=0)))
    monkeypatch.setattr(mspy.writer, "FORMAT_VERSION", "1.2")
    new = lite.Model.Load(write(tmp_path, "new.ms", to_bytes(to_graph(lenet), fmk_type=0)))
    assert (old.version, summarize(old, 0).source) == ("1.1", "ONNX")
    assert (new.version, summarize(new, 0).source) == ("1.2", "TF")


def test_float_model_summary(lenet, tmp_path: Path) -> None:
    path = write(tmp_path, "lenet.ms", convert(lenet))
    model = lite.Model.Load(path)
    s = summarize(model, path.stat().st_size)
    assert (s.name, s.format_version, s.file_bytes, s.source) == ("lenet5", FORMAT_VERSION, path.stat().st_size,
                                                                   "ONNX")
    assert [(t.name, t.shape, t.dtype) for t in s.inputs] == [("input", (1, 1, 32, 32), "float32")]
    assert [(t.name, t.shape, t.dtype) for t in s.outputs] == [("logits", (1, 10), "float32")]
    assert s.op_counts["Conv2D"] == 2 and s.op_counts["FullConnection"] == 3 and s.op_counts["Pooling"] == 2
    assert s.parameters["float32"][0] == float_elements(lenet)       # LeNet has no BatchNorm to fold away
    assert s.parameters["float32"][1] == 4 * float_elements(lenet)
    assert s.quantized == [] and s.subgraphs == {}
    session = lite.LiteSession.CreateSession(path.read_bytes(), None, lite.Context(thread_num=1))
    assert s.arena_bytes == session.arena_bytes > 0
    text = format_summary(s)
    assert "Conv2D" in text and "planned arena" in text and "float32" in text


def test_int8_model_summary(tmp_path: Path) -> None:
    model = models.build("mobilenet_v2", input_size=32, num_classes=10)
    rng = np.random.default_rng(0)
    samples = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(2)]
    graph = quantize(to_graph(model), QuantConfig(method="MAX_MIN"), samples)
    weights = [n.inputs[1] for n in graph.nodes if n.op in ("Conv2D", "FullConnection")]
    s = summarize(lite.Model.Import(to_bytes(graph)))
    by_name = {q.name: q for q in s.quantized}
    for w in weights:
        q, params = by_name[w], graph.values[w].quant_params
        assert (q.dtype, q.num_bits, q.channels) == ("int8", 8, len(params))
        assert q.scale_min == min(p.scale for p in params) and q.scale_max == max(p.scale for p in params)
    assert s.parameters["int8"][0] == sum(graph.values[w].const.size for w in weights)
    assert s.op_counts["QuantDTypeCast"] == 2
    assert "int8    8-bit per channel" in format_summary(s)


def test_weight_quant_model_summary(lenet) -> None:
    graph = quantize(to_graph(lenet), QuantConfig(quant_type="WeightQuant", weight_bits=8,
                                                  min_quant_weight_channel=0))
    s = summarize(lite.Model.Import(to_bytes(graph)))
    quantized = {n for n, v in graph.values.items() if v.quant_params and v.const is not None}
    assert {q.name for q in s.quantized} == quantized and quantized
    assert all(q.dtype == "int8" for q in s.quantized)
    assert [(t.name, t.dtype) for t in s.inputs] == [("input", "float32")]


def test_training_model_summary(lenet) -> None:
    model = lite.Model.Import(convert_for_training(lenet, TrainParams()))
    s = summarize(model)
    assert set(s.subgraphs) == {"eval", "gradients", "optimizer"}
    assert s.subgraphs == {name: len(sg.nodes) for name, sg in model.subgraphs.items()}
    session = lite.TrainSession(lite.Context(thread_num=1))
    session.CompileGraph(model)
    assert s.arena_bytes == session.arena_bytes
    assert "subgraphs: eval" in format_summary(s)


def test_graph_as_dot_and_text(lenet) -> None:
    model = lite.Model.Import(convert(lenet))
    dot = graph_dot(model)
    assert dot.startswith("digraph") and dot.count("shape=box") == 1
    assert sum(f'"n{k}" [label="{n.op}' in dot for k, n in enumerate(model.nodes)) == len(model.nodes)
    lines = graph_text(model).splitlines()
    assert len(lines) == len(model.nodes)
    assert lines[0].split()[1] == model.nodes[0].op and "<- input" in lines[0]


def test_command_line(lenet, tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "lenet.ms", convert(lenet))
    assert main([str(path), "--graph", str(tmp_path / "g.dot"), "--text"]) == 0
    out = capsys.readouterr().out
    assert "inputs:" in out and "graph written to" in out and (tmp_path / "g.dot").read_text().startswith("digraph")
    broken = write(tmp_path, "broken.ms", path.read_bytes()[:100])
    assert main([str(broken)]) == 1
    assert "status -200" in capsys.readouterr().err


def test_module_entry_point_and_benchmark_summary(lenet, tmp_path: Path, capsys) -> None:
    path = write(tmp_path, "lenet.ms", convert(lenet))
    run = subprocess.run([sys.executable, "-m", "lite.inspect", str(path)], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "", "HOME": str(tmp_path)})
    assert run.returncode == 0 and "planned arena" in run.stdout
    assert benchmark_lite([f"--modelFile={path}", "--summary", "--loopCount=1", "--warmUpLoopCount=0"]) == 0
    assert "parameters:" in capsys.readouterr().out
