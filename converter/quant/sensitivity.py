"""Per-layer quantization sensitivity (`--quantDebug`): the SQNR of the model outputs on the calibration data
when only one weighted layer (Conv2D, FullConnection, MatMul) runs in int8 and everything else stays float.
Written as a markdown table and, when matplotlib is importable, as a PNG bar chart beside the JSON report."""
from __future__ import annotations

import copy
import io
import math
import os

import numpy as np

from converter.ir import Graph
from converter.quant.debug import graph_outputs, outputs_sqnr
from converter.quant.full_quant import full_quantize, int8_nodes
from converter.quant.progress import Progress
from lite.atomic_file import write_atomic
from lite.traits import traits

Ranges = dict[str, tuple[float, float]]


def layer_sensitivity(float_graph: Graph, ranges: Ranges, activation_bits: int, weight_bits: int,
                      samples: list[dict[str, np.ndarray]]) -> list[dict]:
    """One row per weighted layer that can run in int8, in graph order: node, op, sqnr_db of the outputs with
    only that layer (its input and output ranges) quantized."""
    reference = graph_outputs(float_graph, samples)
    layers = [n for n in int8_nodes(float_graph, ranges) if traits(n.op).weight_input is not None]
    rows, bar = [], Progress("sensitivity", len(layers))
    for node in layers:
        own = {v: ranges[v] for v in (node.inputs[0], node.outputs[0])}
        qgraph = full_quantize(copy.deepcopy(float_graph), own, activation_bits, weight_bits)
        rows.append({"node": node.name, "op": node.op,
                     "sqnr_db": outputs_sqnr(reference, graph_outputs(qgraph, samples))})
        bar.step()
    return rows


def sensitivity_markdown(rows: list[dict]) -> str:
    """The table, least robust layer marked; layers in graph order."""
    worst = min(range(len(rows)), key=lambda i: rows[i]["sqnr_db"]) if rows else -1
    lines = ["| # | layer | op | output SQNR dB, only this layer int8 |", "|---:|---|---|---:|"]
    lines += [f"| {i} | {r['node']}{' (least robust)' if i == worst else ''} | {r['op']} | "
              f"{r['sqnr_db']:.2f} |" for i, r in enumerate(rows)]
    return "\n".join(lines) + "\n"


def sensitivity_png(rows: list[dict]) -> bytes | None:
    """A bar chart of the rows (None without matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    values = [r["sqnr_db"] if math.isfinite(r["sqnr_db"]) else 0.0 for r in rows]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(rows)), 3.5))
    ax.bar(range(len(rows)), values, color="tab:blue")
    ax.set(xlabel="weighted layer (graph order)", ylabel="output SQNR dB",
           title="Quantization sensitivity: only this layer int8")
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=100)
    plt.close(fig)
    return png.getvalue()


def write_sensitivity(rows: list[dict], json_path: str | os.PathLike) -> list[str]:
    """`<stem>_sensitivity.md` and (with matplotlib) `<stem>_sensitivity.png` beside the JSON report; returns
    the written paths."""
    stem = os.path.splitext(os.fspath(json_path))[0]
    written = [f"{stem}_sensitivity.md"]
    write_atomic(written[0], sensitivity_markdown(rows).encode())
    png = sensitivity_png(rows)
    if png is not None:
        written.append(f"{stem}_sensitivity.png")
        write_atomic(written[1], png)
    return written
