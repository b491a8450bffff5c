"""The quantization debug report: per layer, how close the quantized model's activations stay to the float
model's on the calibration data (cosine similarity and SQNR in dB, accumulated over all samples)."""
from __future__ import annotations

import json
import math
import os

import numpy as np

from converter.ir import Graph
from converter.quant.calibration import feed, run_samples, session_for
from converter.quant.progress import Progress
from converter.quant.qparams import dequantize_tensor
from lite.atomic_file import write_atomic


class Agreement:
    """Running sums for the cosine similarity and SQNR of a float tensor f against its quantized version q."""

    def __init__(self) -> None:
        self.fq = self.ff = self.qq = self.ee = 0.0

    def update(self, f: np.ndarray, q: np.ndarray) -> None:
        f, q = f.astype(np.float64).ravel(), q.astype(np.float64).ravel()
        self.fq += float(f @ q)
        self.ff += float(f @ f)
        self.qq += float(q @ q)
        self.ee += float((f - q) @ (f - q))

    def cosine(self) -> float:
        return self.fq / math.sqrt(self.ff * self.qq) if self.ff and self.qq else float(self.ff == self.qq)

    def sqnr(self) -> float:
        """10 log10(signal power / error power); inf for an exact match."""
        if self.ee == 0:
            return math.inf
        return 10 * math.log10(self.ff / self.ee) if self.ff else -math.inf


def debug_report(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]]) -> list[dict]:
    """One row per node of the quantized graph that the float graph has too (matched by node name):
    node, op, output dtype, cosine, sqnr_db of its first output."""
    float_nodes = {n.name: n for n in float_graph.nodes}
    targets = {float_nodes[n.name].outputs[0]: (n, n.outputs[0]) for n in qgraph.nodes
               if n.name in float_nodes and n.outputs}
    float_acts: dict[str, np.ndarray] = {}
    stats = {k: Agreement() for k in targets}
    by_quant_name = {out: k for k, (_, out) in targets.items()}

    def keep_float(name: str, array: np.ndarray) -> None:
        if name in targets:
            float_acts[name] = array.copy()

    def compare(name: str, array: np.ndarray) -> None:
        key = by_quant_name.get(name)
        if key is None or key not in float_acts:
            return
        params = qgraph.values[name].quant_params
        stats[key].update(float_acts[key], dequantize_tensor(array, params[0]) if params else array)

    fsession, qsession = session_for(float_graph), session_for(qgraph)
    bar = Progress("debug report", len(samples))
    for sample in samples:
        run_samples(fsession, [sample], keep_float, "")
        run_samples(qsession, [sample], compare, "")
        bar.step()
    return [{"node": node.name, "op": node.op, "dtype": str(qgraph.values[out].dtype),
             "cosine": stats[key].cosine(), "sqnr_db": stats[key].sqnr()}
            for key, (node, out) in targets.items()]


def format_report(rows: list[dict]) -> str:
    """One line per row: the fixed-width columns first, the node's full name last (names are long and often
    share a prefix: cut to a width, two rows would look the same)."""
    lines = [f"{'op':<16} {'dtype':<8} {'cosine':>9} {'SQNR dB':>9}  node"]
    lines += [f"{r['op']:<16} {r['dtype']:<8} {r['cosine']:>9.6f} {r['sqnr_db']:>9.2f}  {r['node']}" for r in rows]
    return "\n".join(lines)


def write_report(rows: list[dict], path: str | os.PathLike) -> None:
    """JSON (atomic write); infinite SQNR (exact layers) is written as null."""
    clean = [{k: (None if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()} for r in rows]
    write_atomic(os.fspath(path), json.dumps({"layers": clean}, indent=2).encode())



def graph_outputs(graph: Graph, samples: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Each sample's graph outputs by name, int8 ones dequantized."""
    session, outputs = session_for(graph), []
    for sample in samples:
        feed(session, sample)
        session.RunGraph()
        outputs.append({})
        for name in graph.outputs:
            array, params = session.GetOutputByTensorName(name).numpy(), graph.values[name].quant_params
            outputs[-1][name] = dequantize_tensor(array, params[0]) if params else array
    return outputs


def outputs_sqnr(reference: list[dict[str, np.ndarray]], outputs: list[dict[str, np.ndarray]]) -> float:
    """SQNR (dB) of all `outputs` against the `reference` ones (as `graph_outputs` gives them)."""
    total = Agreement()
    for ref, out in zip(reference, outputs):
        for name, array in ref.items():
            total.update(array, out[name])
    return total.sqnr()


def output_sqnr(float_graph: Graph, qgraph: Graph, samples: list[dict[str, np.ndarray]]) -> float:
    """SQNR (dB) of all the quantized model's outputs against the float model's, over `samples`."""
    return outputs_sqnr(graph_outputs(float_graph, samples), graph_outputs(qgraph, samples))
