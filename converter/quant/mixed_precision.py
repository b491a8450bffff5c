"""Mixed precision: per-layer weight bit widths.

Full quantization (`min_output_sqnr` in `[full_quant_param]`): activations stay at their bit width; each weighted
layer (Conv2D, FullConnection, MatMul) gets 4..8-bit weights or stays float, the smallest file whose model
outputs keep at least `min_output_sqnr` dB SQNR on the calibration samples. The noise each layer adds is
measured alone (the `--quantDebug` sensitivity runs, at 8 and at 4 bits) and taken as additive, weight noise
scaling by 4 per bit; layers whose 8-bit noise alone breaks the budget stay float, and the others are lowered
greedily by least added noise per byte saved, down to 4 bits everywhere. That order is then checked by
quantizing with nearest rounding: the longest prefix of the greedy steps that meets the budget is kept (a binary
search). AdaRound, when on, runs after the search: its rounding lowers the noise further on unseen data, while
measuring the search with it would read the calibration data it fitted (docs/quantization.md).
`BudgetUnreachableError` when even every weighted layer float misses the budget.

Weight-only (`quant_type=MIXED_BIT_WEIGHT_QUANT`, MindSpore Lite's mixed-bit weight quantization): each weight
takes the fewest bits (2..8) whose relative quantization error ||W - Q(W)|| / ||W|| is at most `init_scale`
(`[mixed_bit_weight_quant_param]`); data-free.
"""
from __future__ import annotations

import sys
from typing import Callable

import numpy as np

from converter.ir import Graph, Node
from converter.quant.debug import graph_outputs, outputs_sqnr
from converter.quant.sensitivity import layer_sensitivity
from converter.quant.weights import dequantize_weight, quantize_weight
from lite.status import ParamInvalidError
from lite.traits import traits

FULL_CHOICES = (8, 7, 6, 5, 4)
WEIGHT_ONLY_CHOICES = range(2, 9)
SEARCH_SAMPLES = 8           # calibration samples the search runs on
Build = Callable[[dict[str, int]], Graph]


class BudgetUnreachableError(ParamInvalidError):
    """No bit-width assignment meets `min_output_sqnr` (RET_PARAM_INVALID)."""


def _noise(sqnr_db: float) -> float:
    """Noise power relative to the signal power."""
    return 10 ** (-sqnr_db / 10) if np.isfinite(sqnr_db) else 0.0


def _weight_count(graph: Graph, node: Node) -> int:
    return int(graph.const(node.inputs[traits(node.op).weight_input]).size)


def greedy_steps(sizes: dict[str, int], noise8: dict[str, float], noise4: dict[str, float],
                 budget: float, start: float) -> tuple[dict[str, int], list[tuple[str, int]]]:
    """The starting assignment (layers whose 8-bit noise must go to meet `budget` are float, 0) and the greedy
    lowering steps (layer, new bits) in order of least predicted noise added per byte saved, down to the
    fewest bits everywhere (the search measures where the budget ends)."""
    bits = {name: 8 for name in sizes}
    noise = start
    for name in sorted(noise8, key=noise8.get, reverse=True):
        if noise <= budget:
            break
        bits[name], noise = 0, noise - noise8[name]
    weight4 = {n: max(noise4[n] - noise8[n], 0.0) for n in sizes}

    def added(name: str, b: int) -> float:
        return weight4[name] * (4.0 ** (8 - b) - 1) / (4.0 ** 4 - 1)

    start_bits, steps = dict(bits), []
    while True:
        options = [((added(n, b - 1) - added(n, b)) / sizes[n], n, b - 1) for n, b in bits.items()
                   if b > FULL_CHOICES[-1]]
        if not options:
            return start_bits, steps
        _, name, b = min(options)
        bits[name] = b
        steps.append((name, b))


def search_bits(float_graph: Graph, ranges: dict, activation_bits: int, samples: list[dict[str, np.ndarray]],
                min_sqnr: float, build: Build) -> dict[str, int]:
    """Per-layer weight bits (0 = float) by the module docstring; `build(bits)` quantizes a copy of the float
    graph with that assignment. The choice goes to stderr as a table."""
    samples = samples[:SEARCH_SAMPLES]
    reference = graph_outputs(float_graph, samples)
    rows8 = layer_sensitivity(float_graph, ranges, activation_bits, 8, samples)
    rows4 = layer_sensitivity(float_graph, ranges, activation_bits, 4, samples)
    nodes = {n.name: n for n in float_graph.nodes}
    sizes = {r["node"]: _weight_count(float_graph, nodes[r["node"]]) for r in rows8}
    noise8 = {r["node"]: _noise(r["sqnr_db"]) for r in rows8}
    noise4 = {r["node"]: _noise(r["sqnr_db"]) for r in rows4}

    def measured(bits: dict[str, int]) -> float:
        return outputs_sqnr(reference, graph_outputs(build(bits), samples))

    everything8 = measured({n: 8 for n in sizes})
    start, steps = greedy_steps(sizes, noise8, noise4, _noise(min_sqnr), _noise(everything8))
    if measured(start) < min_sqnr:
        floor = measured({n: 0 for n in sizes})
        if floor < min_sqnr:
            raise BudgetUnreachableError(f"min_output_sqnr = {min_sqnr} dB is out of reach: with every weighted "
                                         f"layer float the outputs reach {floor:.2f} dB on the calibration data")
        start = {n: 0 for n in sizes}
        steps = []
    lo, hi = 0, len(steps)                      # the longest prefix of steps that meets the budget
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measured({**start, **dict(steps[:mid])}) >= min_sqnr:
            lo = mid
        else:
            hi = mid - 1
    bits = {**start, **dict(steps[:lo])}
    print(bits_markdown(bits, sizes, noise8, noise4, measured(bits), min_sqnr), file=sys.stderr)
    return bits


def bits_markdown(bits: dict[str, int], sizes: dict[str, int], noise8: dict[str, float],
                  noise4: dict[str, float], sqnr: float, budget: float) -> str:
    """The chosen assignment: one row per layer with its sensitivities, then the totals."""
    lines = [f"mixed precision: output SQNR {sqnr:.2f} dB (budget {budget:.2f} dB)", "",
             "| layer | weights | only this layer int8, SQNR dB at W8 / W4 | weight bits |", "|---|---:|---|---:|"]
    db = lambda n: 10 * np.log10(1 / n) if n > 0 else float("inf")  # noqa: E731
    lines += [f"| {n} | {sizes[n]:,} | {db(noise8[n]):.2f} / {db(noise4[n]):.2f} | {b or 'float'} |"
              for n, b in bits.items()]
    total = sum(sizes.values())
    stored = sum(sizes[n] * (b or 32) for n, b in bits.items()) / 8
    lines.append(f"| all | {total:,} | | {stored / total:.2f} bytes per weight |")
    return "\n".join(lines) + "\n"


def relative_error(w: np.ndarray, axis: int, bits: int) -> float:
    q, params = quantize_weight(w, axis, bits)
    return float(np.linalg.norm(dequantize_weight(q, params, axis) - w) / max(np.linalg.norm(w), 1e-30))


def weight_only_bits(init_scale: float) -> Callable[[np.ndarray, int], int]:
    """MIXED_BIT_WEIGHT_QUANT's rule: the fewest bits whose relative weight error is within `init_scale`."""
    def choose(w: np.ndarray, axis: int) -> int:
        return next((b for b in WEIGHT_ONLY_CHOICES if relative_error(w, axis, b) <= init_scale),
                    WEIGHT_ONLY_CHOICES[-1])
    return choose

