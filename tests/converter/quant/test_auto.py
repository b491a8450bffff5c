"""converter/quant/auto.py: which methods run when the config leaves method keys out (preset AUTO or
MINDSPORE_LITE), the printed choice, and AdaRound within the time budget. Oracles: the same choices made
explicitly through the method keys, and the calibration data's own extremes."""
from __future__ import annotations

import re

import numpy as np
import pytest

from converter import to_graph
from converter.export import to_bytes
from converter.quant import QuantConfig, parse_config, quantize
from converter.quant.auto import CHOICE_SAMPLES, estimated_total, resolve
from converter.quant.calibration import calibrate
from converter.quant.config import AUTO, MINDSPORE_LITE
from converter.quant.debug import graph_outputs, outputs_sqnr
from lite.status import ParamInvalidError
from tests.converter.quant.test_methods import chain_model
from tests.converter.quant.test_quantization import samples_for
from tests.util import run_ort


def test_no_method_key_is_auto_and_any_method_key_is_mindspore_lite():
    auto = resolve(parse_config("[common_quant_param]\nbit_num=8\n"))
    assert (auto.preset, auto.method, auto.cross_layer_equalization, auto.bias_correction, auto.adaround) == \
        (AUTO, None, True, True, None)
    given = resolve(parse_config("[full_quant_param]\nbias_correction=true\n"))
    assert (given.preset, given.method, given.bias_correction, given.cross_layer_equalization, given.adaround) == \
        (MINDSPORE_LITE, "MAX_MIN", True, False, False)
    asked = resolve(parse_config("[full_quant_param]\npreset=auto\nadaround=true\n"))
    assert (asked.preset, asked.method, asked.bias_correction, asked.adaround, asked.given) == \
        (AUTO, None, True, True, ("adaround",))
    old = resolve(parse_config("image_path=x\nmethod_x=KL\n"))          # MindSpore Lite r1.1's form
    assert (old.preset, old.method, old.bias_correction) == (MINDSPORE_LITE, "KL", False)


@pytest.mark.parametrize("text, key", [("preset=FAST", "preset"), ("time_budget=0", "time_budget"),
                                       ("time_budget=soon", "time_budget")])
def test_bad_preset_keys_are_named(text, key):
    with pytest.raises(ParamInvalidError, match=key):
        parse_config(f"[full_quant_param]\n{text}\n").validate()


def test_the_estimate_adds_the_time_before_adaround_and_bias_corrections_passes():
    assert estimated_total(resolve(QuantConfig()), 10, 30, 4) == 10 + 30 + 4 * 4
    assert estimated_total(resolve(QuantConfig(preset=AUTO, bias_correction=False)), 10, 40, 4) == 50


def test_mindspore_lite_preset_takes_the_calibration_extremes_and_corrects_nothing(capsys):
    samples = samples_for((1, 3, 8, 8), 4)
    graph = quantize(to_graph(chain_model()), QuantConfig(preset=MINDSPORE_LITE), samples)
    x = np.concatenate([s["input"] for s in samples])
    cast = next(n for n in graph.nodes if n.inputs[0] == "input")
    p = graph.values[cast.outputs[0]].quant_params[0]
    assert (p.min, p.max) == pytest.approx((float(x.min()), float(x.max())))      # MAX_MIN of the input
    assert "bias correction" not in capsys.readouterr().err
    assert to_bytes(graph) == to_bytes(quantize(to_graph(chain_model()), QuantConfig(method="MAX_MIN"), samples))


def test_calibration_hands_back_the_float_outputs_the_choices_are_scored_against():
    """The range choice and the bias correction check score against the float outputs that the calibration run
    saw; they are the model's own (onnxruntime on the ONNX model), sample by sample."""
    samples = samples_for((1, 3, 8, 8), 3)
    outputs: list[dict[str, np.ndarray]] = []
    calibrate(to_graph(chain_model()), samples, "KL", 8, outputs=outputs)
    assert len(outputs) == len(samples)
    for sample, got in zip(samples, outputs):
        np.testing.assert_allclose(got["logits"], run_ort(chain_model(), sample)["logits"], rtol=1e-4, atol=1e-4)


def test_auto_prints_its_choice_and_takes_the_ranges_the_calibration_outputs_prefer(capsys):
    samples = samples_for((1, 3, 8, 8), 10)
    quantize(to_graph(chain_model()), QuantConfig(time_budget=1e-6), samples)
    err = capsys.readouterr().err
    assert "preset AUTO (no method keys in the config" in err and "AdaRound off" in err
    printed = dict(re.findall(r"(KL|MAX_MIN) (-?[\d.]+) dB", err.split("calibration output SQNR")[1]))
    reference = graph_outputs(to_graph(chain_model()), samples[:CHOICE_SAMPLES])
    measured = {}
    for method in ("KL", "MAX_MIN"):                       # the same choice made through the method keys
        q = quantize(to_graph(chain_model()), QuantConfig(method=method, cross_layer_equalization=True), samples)
        measured[method] = outputs_sqnr(reference, graph_outputs(q, samples[:CHOICE_SAMPLES]))
    assert {m: float(db) for m, db in printed.items()} == pytest.approx(measured, abs=0.01)
    assert f"activation ranges {max(measured, key=measured.get)} (" in err


def test_auto_rounds_with_adaround_within_the_budget(capsys):
    samples = samples_for((1, 3, 8, 8), 4)
    auto = quantize(to_graph(chain_model()), QuantConfig(time_budget=600), samples)
    err = capsys.readouterr().err
    assert re.search(r"AdaRound on: estimated \d+ s for 5 layers on 4 samples, \d+ s for the whole quantization "
                     r"on the reference machine \(2 idle cores\), within time_budget=600 s", err)
    assert "adaround: 5/5" in err
    nearest = quantize(to_graph(chain_model()), QuantConfig(time_budget=1e-6), samples)
    weights = [(auto.values[n.inputs[1]].const, nearest.values[m.inputs[1]].const)
               for n, m in zip(auto.nodes, nearest.nodes) if n.op == "Conv2D"]
    assert any((a != b).any() for a, b in weights)
