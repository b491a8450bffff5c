"""Which post-training methods run (docs/quantization.md, "Default methods").

Each method key a config leaves out takes its preset's value. The preset is `preset` when the config gives
it, else AUTO when the config gives no method key, else MINDSPORE_LITE (so a config written for MindSpore Lite
keeps MindSpore Lite's meaning). AUTO is the best combination measured (KL's or MAX_MIN's ranges, whichever the
calibration outputs prefer, cross-layer equalization, checked bias correction) and AdaRound when its estimated
time fits `time_budget` with the rest of the quantization (estimated from the model and the calibration set
alone, `cost`, so the choice does not depend on the machine or its load);
MINDSPORE_LITE is MindSpore Lite's own defaults (MAX_MIN ranges and nothing else).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from converter.ir import Graph
from converter.quant.calibration import shared_ranges
from converter.quant.config import AUTO, METHOD_KEYS, MINDSPORE_LITE, PRESET_METHODS, QuantConfig
from converter.quant.debug import graph_outputs, outputs_sqnr
from converter.quant.observers import Observer
from converter.quant.progress import duration

Ranges = dict[str, tuple[float, float]]

BIAS_CORRECTION_PASSES = 4     # runs over the calibration set that checked bias correction takes (one float
                               # pass feeding each layer alone, then float, int8 and corrected int8 outputs)


RANGE_CHOICES = ("KL", "MAX_MIN")   # AUTO's activation ranges: KL clips LeNet-5's ReLUs too far (21 dB against
                                   # MAX_MIN's 41 dB on MNIST), MAX_MIN trails KL on EfficientNet-Lite0
CHOICE_SAMPLES = 8                 # calibration samples the choice runs on


@dataclass
class Methods:
    method: str | None             # None: KL's or MAX_MIN's ranges, whichever `choose_ranges` prefers
    weight_method: str
    bias_correction: bool
    cross_layer_equalization: bool
    adaround: bool | None          # None: decided by the time budget (`estimated_total`)
    preset: str
    given: tuple[str, ...]         # the method keys the config gave


def resolve(config: QuantConfig) -> Methods:
    """The config's method keys, the left-out ones filled by its preset."""
    given = tuple(key for key, field in METHOD_KEYS.items() if getattr(config, field) is not None)
    preset = config.preset or (MINDSPORE_LITE if given else AUTO)
    values = {field: PRESET_METHODS[preset][field] if getattr(config, field) is None else getattr(config, field)
              for field in METHOD_KEYS.values()}
    return Methods(**values, preset=preset, given=given)


def choose_ranges(float_graph: Graph, observers: dict[str, Observer], samples: list[dict[str, np.ndarray]],
                  build: Callable[[Ranges], Graph],
                  reference: list[dict[str, np.ndarray]]) -> tuple[str, Ranges, dict[str, float]]:
    """Of RANGE_CHOICES (one histogram pass gives both: every observer keeps the extremes), the ranges whose
    quantized graph (`build(ranges)`) gives the higher output SQNR against the float outputs `reference` on the
    first CHOICE_SAMPLES samples; with every choice's SQNR."""
    samples, reference = samples[:CHOICE_SAMPLES], reference[:CHOICE_SAMPLES]
    ranges, sqnr = {}, {}
    for method in RANGE_CHOICES:
        found = {k: o.range() if method == "KL" else Observer.range(o) for k, o in observers.items()}
        ranges[method] = shared_ranges(float_graph, found)
        sqnr[method] = outputs_sqnr(reference, graph_outputs(build(ranges[method]), samples))
    best = max(RANGE_CHOICES, key=lambda m: sqnr[m])
    return best, ranges[best], sqnr


def estimated_total(methods: Methods, done: float, adaround_seconds: float, pass_seconds: float) -> float:
    """The quantization's seconds with AdaRound: the `done` seconds before it, its own, and bias correction's
    passes after it. Every time is the reference machine's estimate (`cost`), never a measurement, so the same
    model and calibration set decide the same anywhere."""
    later = BIAS_CORRECTION_PASSES * pass_seconds if methods.bias_correction else 0.0
    return done + adaround_seconds + later


def summary(methods: Methods, method: str, sqnr: dict[str, float], adaround: bool, why: str) -> str:
    """The short block printed when the preset chose something: what runs, and why (`sqnr`: the calibration
    output SQNR of each range choice, when there was one)."""
    origin = "no method keys in the config" if not methods.given else f"given: {', '.join(methods.given)}"
    measured = " against ".join(f"{m} {db:.2f} dB" for m, db in sqnr.items())
    tools = [f"activation ranges {method}" + (f" (calibration output SQNR {measured})" if sqnr else ""),
             f"weight scales {methods.weight_method}"]
    tools += ["cross-layer equalization"] * methods.cross_layer_equalization
    tools += ["bias correction (kept when it raises the calibration SQNR)"] * methods.bias_correction
    return "\n".join([f"quantization methods: preset {methods.preset} ({origin}; preset={MINDSPORE_LITE} in "
                      "[full_quant_param] gives MindSpore Lite's own MAX_MIN alone)",
                      f"  {', '.join(tools)}",
                      f"  AdaRound {'on' if adaround else 'off'}: {why}"])


def adaround_reason(layers: int, samples: int, seconds: float, total: float, budget: float, on: bool) -> str:
    if layers == 0:
        return "no layer to round"
    estimate = (f"estimated {duration(seconds)} for {layers} layers on {samples} samples, "
                f"{duration(total)} for the whole quantization on the reference machine (2 idle cores)")
    if on:
        return f"{estimate}, within time_budget={budget:g} s"
    return f"{estimate}, past time_budget={budget:g} s (a larger one, or adaround=true with preset=AUTO, asks for it)"
