"""converter/quant/cost.py: AUTO's time estimate is a function of the model and the calibration set. Oracles:
multiply-adds counted by hand from the layers' shapes, and the same conversion on a machine whose clock and
load average say it is a thousand times slower."""
from __future__ import annotations

import os
import re
import time

import pytest

from converter import to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, quantize
from converter.quant.cost import PASS_ELEMENTS, PASS_MACS, graph_work
from tests.converter.quant.test_methods import chain_model
from tests.converter.quant.test_quantization import samples_for


def test_work_counts_the_products_multiply_adds_by_hand():
    # chain_model on 8x8: conv 3->8 3x3, conv 8->16 1x1, conv 16->12 1x1, depthwise 12 3x3, Gemm 12->5
    by_hand = 64 * 8 * 27 + 64 * 16 * 8 + 64 * 12 * 16 + 64 * 12 * 9 + 5 * 12
    work = graph_work(to_graph(chain_model()))
    assert work.macs == by_hand
    assert work.elements >= 64 * (8 + 16 + 12 + 12) + 12 + 5                 # at least the main activations
    assert work.pass_seconds(10) == pytest.approx(10 * (by_hand / PASS_MACS + work.elements / PASS_ELEMENTS))


def estimate_line(err: str) -> str:
    return re.search(r"AdaRound (on|off): .*", err).group(0)


def test_auto_decides_the_same_on_a_slow_and_busy_machine(capsys, monkeypatch):
    samples = samples_for((1, 3, 8, 8), 4)
    config = dict(time_budget=5)           # the chain's estimate is a second or two: AdaRound fits
    quiet = to_bytes(quantize(to_graph(chain_model()), QuantConfig(**config), samples))
    quiet_line = estimate_line(capsys.readouterr().err)
    clock = iter(range(0, 10 ** 9, 1000))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))      # every phase "takes" 1000 s
    monkeypatch.setattr(os, "getloadavg", lambda: (400.0, 400.0, 400.0), raising=False)
    busy = to_bytes(quantize(to_graph(chain_model()), QuantConfig(**config), samples))
    busy_line = estimate_line(capsys.readouterr().err)
    assert quiet_line.startswith("AdaRound on") and busy_line == quiet_line
    assert busy == quiet
