"""The control-flow model of the zoo (PyTorch, scripted, torch.onnx-exported: an If on the input's loudness, a
Loop whose trip count comes from the data and grows a trace, a while-Loop on a data-dependent condition)
converts with converter_lite and matches onnxruntime, whatever branch and trip count an input takes."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import lite
import models
from converter.cli import main
from tests.util import relative_to_range, run_lite, run_ort

TOLERANCE = 1e-4     # of the output's range


@pytest.fixture(scope="module")
def refiner() -> onnx.ModelProto:
    return models.build("gated_refiner", batch=None)


def test_the_export_has_an_if_and_loops_with_data_dependent_trip_counts(refiner):
    nodes = list(refiner.graph.node)
    assert [n.op_type for n in nodes].count("If") == 1 and [n.op_type for n in nodes].count("Loop") == 2
    constants = {o for n in nodes if n.op_type == "Constant" for o in n.output} | \
        {i.name for i in refiner.graph.initializer}
    for loop in (n for n in nodes if n.op_type == "Loop"):
        assert not {i for i in loop.input[:2] if i} <= constants     # count or condition computed from data


def test_gated_refiner_matches_onnxruntime(refiner, tmp_path, capsys):
    models.save(refiner, tmp_path / "refiner.onnx")
    code = main(["--fmk=ONNX", f"--modelFile={tmp_path / 'refiner.onnx'}", f"--outputFile={tmp_path / 'refiner'}",
                 "--inputShape=input:2,8"])
    assert code == 0 and "CONVERT RESULT SUCCESS:0" in capsys.readouterr().out
    session = lite.LiteSession.CreateSession(lite.Context())
    session.CompileGraph(lite.Model.Load(tmp_path / "refiner.ms"))
    rng = np.random.default_rng(0)
    seen = set()
    for scale in (0.5, 0.5, 0.5, 3.0, 3.0, 3.0):        # quiet and loud inputs: both branches
        x = (rng.standard_normal((2, 8)) * scale).astype(np.float32)
        got, want = run_lite(session, {"input": x}), run_ort(refiner, {"input": x})
        assert got["trace"].shape == want["trace"].shape
        for name in ("logits", "trace"):
            assert relative_to_range(got[name], want[name]) <= TOLERANCE, name
        seen.add((scale, want["trace"].shape[1]))
    assert len({steps for _, steps in seen}) >= 2          # the trip count did change from input to input
