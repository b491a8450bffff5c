"""Tensor dumps: statistics equal to numpy's over the session's own tensors, MindSpore-style config selection,
and `compare` finding the first node where a deliberately perturbed model departs (ours vs onnxruntime agree)."""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import lite
import models
from converter import convert
from converter.ort_dump import dump_onnxruntime
from lite.dump import Dump, compare, first_divergence, load
from lite.tools.benchmark import main as benchmark_lite

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return models.build("mobilenet_v2", input_size=32, num_classes=10)


@pytest.fixture(scope="module")
def x() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((1, 3, 32, 32)).astype(np.float32)


def session_for(m: onnx.ModelProto, x: np.ndarray, adds: bool = False) -> lite.LiteSession:
    """`adds`: keep the residual Adds as nodes of their own (no fuse_residual), in-place kernels to dump."""
    data = convert(m, disabled_passes=["fuse_residual"] if adds else ())
    session = lite.LiteSession.CreateSession(data, None, lite.Context(thread_num=1))
    session.GetInputs()[0].set_data(x)
    return session


def dump_ours(m: onnx.ModelProto, x: np.ndarray, folder: Path, adds: bool = False, **options) -> Path:
    with Dump(folder, **options) as dump:
        dump.run(session_for(m, x, adds))
    return folder


def test_statistics_are_those_of_the_tensors(model, x, tmp_path: Path) -> None:
    session = session_for(model, x)
    seen: dict[str, np.ndarray] = {}
    with Dump(tmp_path, saved_data="tensor") as dump:
        session.RunGraph(before=dump.before,
                         after=lambda i, o, p: [seen.__setitem__(t.tensor_name(), t.numpy().copy()) for t in o]
                         and dump.after(i, o, p))
    records = [r for r in load(tmp_path) if r["io"] == "output"]
    assert len(records) == len(seen) > 50
    for r in records:
        a = seen[r["tensor"]]
        assert r["shape"] == list(a.shape) and r["dtype"] == str(a.dtype)
        assert r["md5"] == hashlib.md5(np.ascontiguousarray(a).tobytes()).hexdigest()
        assert r["min"] == float(a.min()) and r["max"] == float(a.max())
        assert abs(r["mean"] - float(a.astype(np.float64).mean())) < 1e-12
        assert r["nan"] == r["inf"] == 0
        assert np.array_equal(np.load(tmp_path / "0" / (next(tmp_path.joinpath("0").glob("*.output.npy")).name)),
                              np.load(next(tmp_path.joinpath("0").glob("*.output.npy"))))
    final = next(r for r in records if r["tensor"] == "logits")
    assert final["md5"] == hashlib.md5(session.GetOutputs()["logits"].numpy().tobytes()).hexdigest()


def test_inputs_are_taken_before_in_place_kernels_overwrite_them(model, x, tmp_path: Path) -> None:
    dump_ours(model, x, tmp_path, adds=True, saved_data="tensor")
    records = load(tmp_path)
    outputs = {r["tensor"]: r["md5"] for r in records if r["io"] == "output"}
    inputs = [r for r in records if r["io"] == "input" and r["tensor"] in outputs]
    assert any(r["op"] == "Add" for r in inputs)                              # residual Adds run in place
    assert all(r["md5"] == outputs[r["tensor"]] for r in inputs)


def test_config_selects_nodes_ops_sides_and_iterations(model, x, tmp_path: Path) -> None:
    config = tmp_path / "dump.json"
    config.write_text(json.dumps({"common_dump_settings": {
        "dump_mode": 1, "path": "out", "net_name": "mnv2", "iteration": "1", "input_output": 2,
        "kernels": ["features\\.1[0-9]/"], "saved_data": "statistic"}}))
    dump = Dump.from_config(config)
    session = session_for(model, x, adds=True)
    for _ in range(3):
        dump.run(session)
    dump.close()
    records = load(tmp_path / "out" / "mnv2")
    assert records and {r["iteration"] for r in records} == {1} and {r["io"] for r in records} == {"output"}
    assert all("/features.1" in r["node"] and r["node"].split("/features.1")[1][0].isdigit() for r in records)
    assert not (tmp_path / "out" / "mnv2" / "1").exists()                      # statistics only
    by_op = Dump(tmp_path / "ops", op_types=["Add"])
    by_op.run(session)
    by_op.close()
    assert {r["op"] for r in load(tmp_path / "ops")} == {"Add"}


@pytest.mark.parametrize("settings, key", [({"dump_mode": 0, "pathx": "a"}, "pathx"),
                                           ({"saved_data": "everything"}, "saved_data"),
                                           ({"iteration": "1-x"}, "iteration"),
                                           ({"input_output": 5}, "input_output"),
                                           ({"dump_mode": 1, "kernels": ["(unclosed"]}, "kernels")])
def test_bad_configs_name_the_key(tmp_path: Path, settings: dict, key: str) -> None:
    config = tmp_path / "dump.json"
    config.write_text(json.dumps({"common_dump_settings": settings}))
    with pytest.raises(lite.ParamInvalidError, match=key):
        Dump.from_config(config)


def test_ours_and_onnxruntime_agree_tensor_by_tensor(model, x, tmp_path: Path) -> None:
    dump_ours(model, x, tmp_path / "ours", saved_data="tensor")
    with Dump(tmp_path / "ort", saved_data="tensor") as dump:
        dump_onnxruntime(model, {"input": x}, dump)
    rows = compare(tmp_path / "ort", tmp_path / "ours")
    assert len(rows) > 50                                  # NHWC tensors meet their NCHW originals
    assert first_divergence(rows) is None
    assert min(r.sqnr for r in rows) > 60


def test_compare_finds_the_first_diverging_node_of_a_perturbed_model(model, x, tmp_path: Path) -> None:
    perturbed = onnx.ModelProto()
    perturbed.CopyFrom(model)
    conv = next(n for n in perturbed.graph.node if n.name == "/features/features.6/conv/conv.0/conv.0.0/Conv")
    weight = next(i for i in perturbed.graph.initializer if i.name == conv.input[1])
    values = numpy_helper.to_array(weight).copy()
    values[:4] *= 1.5
    weight.CopyFrom(numpy_helper.from_array(values, weight.name))
    dump_ours(model, x, tmp_path / "a", saved_data="tensor")
    dump_ours(perturbed, x, tmp_path / "b", saved_data="tensor")
    rows = compare(tmp_path / "a", tmp_path / "b")
    first = first_divergence(rows)
    assert first is not None and first.node == conv.name
    before = rows[:rows.index(first)]
    assert before and all(r.identical for r in before)
    run = subprocess.run([sys.executable, "-m", "lite.dump", "compare", str(tmp_path / "a"), str(tmp_path / "b")],
                         capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(ROOT)})
    assert run.returncode == 1 and f"first divergence: node '{conv.name}'" in run.stdout
    stats_only = compare(dump_ours(model, x, tmp_path / "c"), dump_ours(perturbed, x, tmp_path / "d"))
    assert first_divergence(stats_only).node == conv.name                     # from statistics alone


def test_benchmark_dump_flag(model, x, tmp_path: Path) -> None:
    (tmp_path / "m.ms").write_bytes(convert(model))
    assert benchmark_lite([f"--modelFile={tmp_path / 'm.ms'}", f"--dump={tmp_path / 'dump'}", "--loopCount=1"]) == 0
    assert {r["iteration"] for r in load(tmp_path / "dump")} == {0}


def test_int8_tensors_are_compared_as_the_real_values_they_stand_for(tmp_path: Path) -> None:
    from converter import to_graph
    from converter.export import to_bytes
    from converter.quant import QuantConfig, quantize
    lenet = models.build("lenet5")
    rng = np.random.default_rng(0)
    calib = [{"input": rng.standard_normal((1, 1, 32, 32)).astype(np.float32)} for _ in range(4)]
    x = calib[0]["input"]
    int8 = to_bytes(quantize(to_graph(lenet), QuantConfig(method="MAX_MIN"), calib))
    for folder, buf in (("float", convert(lenet)), ("int8", int8)):
        session = lite.LiteSession.CreateSession(buf, None, lite.Context(thread_num=1))
        session.GetInputs()[0].set_data(x)
        with Dump(tmp_path / folder, saved_data="tensor") as dump:
            dump.run(session)
    assert all(len(r["quant"]) == 1 for r in load(tmp_path / "int8") if r["dtype"] == "int8" and r["io"] == "output")
    rows = compare(tmp_path / "float", tmp_path / "int8", min_sqnr=25)
    conv = next(r for r in rows if r.op == "Conv2D")
    assert conv.sqnr > 30 and conv.cosine > 0.999                  # raw int8 codes would score below 0 dB
