"""Hostile and long-running use: mutated float, int8, training and encrypted `.ms` files end in a `LiteError`
or a working session — never another exception, a hang or an allocation beyond the memory limit; 10,000 runs
keep memory flat; NaN and Inf inputs give outputs, not crashes.

`python -m lite.tools.fuzz model.ms --cases 25000` runs the same campaign longer, on any file."""
from __future__ import annotations

import gc
import tracemalloc
import warnings

import numpy as np
import pytest

import lite
import lite.compiler
import models
from converter import convert, convert_for_training, to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from converter.train import TrainParams
from lite import protect
from lite.tools.fuzz import FuzzOutcome, fuzz

KEY = bytes(range(32))
CASES = 500          # per file kind: 2,000 in all
SEEDS = {"float": 1, "int8": 2, "training": 3, "encrypted": 4}


@pytest.fixture(scope="module")
def files() -> dict[str, bytes]:
    lenet = models.build("lenet5")
    rng = np.random.default_rng(0)
    calib = [{"input": rng.standard_normal((1, 1, 32, 32)).astype(np.float32)} for _ in range(2)]
    plain = convert(lenet)
    return {"float": plain, "int8": to_bytes(quantize(to_graph(lenet), QuantConfig(method="MAX_MIN"), calib)),
            "training": convert_for_training(lenet, TrainParams()), "encrypted": protect.encrypt(plain, KEY)}


@pytest.mark.parametrize("kind", ["float", "int8", "training", "encrypted"])
def test_mutated_models_end_in_lite_errors_only(files, kind: str, monkeypatch) -> None:
    limit = 64 << 20
    monkeypatch.setattr(lite.compiler, "MAX_ARENA_BYTES", limit)
    outcome: FuzzOutcome = fuzz(files[kind], CASES, SEEDS[kind], KEY if kind == "encrypted" else None, timeout_s=20.0)
    assert outcome.unexpected == [], outcome.unexpected[:3]
    assert outcome.cases == CASES and outcome.refused + outcome.ran == CASES
    assert outcome.peak_bytes <= limit + 16 * len(files[kind]) + (32 << 20)
    if kind == "encrypted":
        assert outcome.ran == outcome.unchanged            # every altered byte is refused
    else:
        assert outcome.refused > 0 and outcome.ran > 0   # both kinds of mutant were met


def test_ten_thousand_runs_keep_memory_flat(files) -> None:
    session = lite.LiteSession.CreateSession(files["float"], None, lite.Context(thread_num=1))
    session.GetInputs()[0].set_data(np.ones((1, 1, 32, 32), np.float32))
    for _ in range(100):
        session.RunGraph()
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    try:
        start = tracemalloc.take_snapshot()
        for _ in range(10_000):
            session.RunGraph()
        growth = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(start, "filename"))
    finally:
        tracemalloc.stop()
    gc.collect()
    assert growth < 64 << 10, f"{growth} bytes more after 10,000 runs"
    assert len(gc.get_objects()) - objects < 100


@pytest.mark.parametrize("kind", ["float", "int8"])
def test_nan_and_inf_inputs_give_outputs(files, kind: str) -> None:
    session = lite.LiteSession.CreateSession(files[kind], None, lite.Context(thread_num=1))
    x = np.zeros((1, 1, 32, 32), np.float32)
    x[0, 0, :4] = np.nan
    x[0, 0, 4:8] = np.inf
    x[0, 0, 8:12] = -np.inf
    session.GetInputs()[0].set_data(x)
    with warnings.catch_warnings():
        # float math reports inf - inf as numpy warnings; int8 must not hide an undefined NaN cast behind one
        warnings.simplefilter("error" if kind == "int8" else "ignore")
        assert session.RunGraph() == lite.RET_OK
    logits = session.GetOutputs()["logits"].numpy()
    assert logits.shape == (1, 10)
    if kind == "int8":
        assert np.isfinite(logits).all()                   # NaN quantizes to the minimum, Inf saturates
    else:
        assert np.isnan(logits).all()                      # NaN propagates (IEEE arithmetic)
