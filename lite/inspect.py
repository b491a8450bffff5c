"""`python -m lite.inspect model.ms [--graph out.dot|out.png] [--text] [--decryptKey=hex]`: what is inside a
`.ms` file (an encrypted one with its key).

Prints the format version, the graph inputs and outputs (shape, with unknown dims by their source names or `?`;
dtype), node counts by op type, the parameters (count and bytes by dtype), the quantized tensors with the range of
their scales, the training subgraphs, the bodies of the control-flow nodes and the arena a session plans for the
model (a model with several signatures: each with its inputs and outputs). `--graph` writes the graph as Graphviz
`.dot` (a `.png` needs Graphviz's `dot` on the PATH); `--text` prints it as numbered lines, each naming the nodes
it reads unless that is the line above, with the bodies of control-flow nodes indented below them.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from lite import dtypes, protect
from lite.context import Context
from lite.model import Model, NodeDef, TensorDef
from lite.session import LiteSession
from lite.signatures import local_name, signatures
from lite.status import LiteError
from lite.traits import traits
from schema import FMK_TYPES


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str
    dim_names: tuple[str, ...] = ()      # the source's names of the unknown dims ("": unnamed)

    @property
    def dims_text(self) -> str:
        """The shape with each unknown dim shown by its source name, else `?`: `[batch, 3, height, width]`."""
        names = self.dim_names or ("",) * len(self.shape)
        return "[" + ", ".join(str(d) if d >= 0 else n or "?" for d, n in zip(self.shape, names)) + "]"


@dataclass(frozen=True)
class QuantInfo:
    """A quantized tensor: its bits, how many channels its parameters cover (1: per tensor) and scale range."""
    name: str
    dtype: str
    num_bits: int
    channels: int
    scale_min: float
    scale_max: float
    zero_points: tuple[int, int]


@dataclass
class Summary:
    name: str
    format_version: str
    file_bytes: int | None
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    op_counts: Counter
    parameters: dict[str, tuple[int, int]]          # dtype -> (elements, bytes) of constant tensors
    quantized: list[QuantInfo]
    subgraphs: dict[str, int] = field(default_factory=dict)   # name -> node count
    bodies: dict[str, int] = field(default_factory=dict)      # control-flow bodies: name -> node count
    signatures: dict[str, tuple[list[TensorInfo], list[TensorInfo]]] = field(default_factory=dict)  # key -> io
    arena_bytes: int | None = None
    arena_error: str = ""
    encrypted: bool = False
    source: str = "ONNX"                             # the framework the model was converted from

    @property
    def parameter_count(self) -> int:
        return sum(n for n, _ in self.parameters.values())


def _info(t: TensorDef, key: str | None = None) -> TensorInfo:
    """`t` as entry point `key` names it (`lite.signatures`)."""
    return TensorInfo(local_name(key, t.name), tuple(t.dims), dtypes.type_name(t.data_type), t.dim_names)


def _quant(t: TensorDef) -> QuantInfo:
    scales = np.array([q.scale for q in t.quant_params])
    zps = [int(q.zeroPoint) for q in t.quant_params]
    return QuantInfo(t.name, dtypes.type_name(t.data_type), int(t.quant_params[0].numBits), len(t.quant_params),
                     float(scales.min()), float(scales.max()), (min(zps), max(zps)))


def _planned_arena(model: Model) -> int:
    """The arena bytes of a session compiled for `model` (a training session for a training model)."""
    if model.subgraphs and not signatures(model):
        from lite.train import TrainSession
        session: LiteSession = TrainSession(Context(thread_num=1))
    else:
        session = LiteSession(Context(thread_num=1))
    session.CompileGraph(model)
    return session.arena_bytes


def summarize(model: Model, file_bytes: int | None = None, encrypted: bool = False) -> Summary:
    """The summary of an imported model; the arena is planned by compiling it (an error there is reported, not
    raised, so a model that does not compile can still be inspected)."""
    parameters: dict[str, tuple[int, int]] = {}
    for t in model.tensors:
        if t.is_const:
            n, b = parameters.get(dtypes.type_name(t.data_type), (0, 0))
            parameters[dtypes.type_name(t.data_type)] = (n + int(t.data.size), b + int(t.data.nbytes))
    entries = {key: ([_info(model.tensors[i], key) for i in sg.inputs],
                     [_info(model.tensors[o], key) for o in sg.outputs]) for key, sg in signatures(model).items()}
    default = next(iter(entries.values()), None)    # what a session runs first
    summary = Summary(
        name=model.name, format_version=model.version, file_bytes=file_bytes,
        inputs=default[0] if default else [_info(model.tensors[i]) for i in model.inputs],
        outputs=default[1] if default else [_info(model.tensors[i]) for i in model.outputs],
        op_counts=Counter(n.op for n in [*model.nodes, *(n for b in model.bodies for n in b.nodes)]),
        parameters=parameters, quantized=[_quant(t) for t in model.tensors if t.quant_params],
        subgraphs={name: len(sg.nodes) for name, sg in model.subgraphs.items() if not entries},
        bodies={b.name: len(b.nodes) for b in model.bodies}, signatures=entries, encrypted=encrypted,
        source=FMK_TYPES.get(model.fmk_type, f"fmk_type {model.fmk_type}"))
    try:
        summary.arena_bytes = _planned_arena(model)
    except LiteError as e:
        summary.arena_error = f"{type(e).__name__}: {e}"
    return summary


def _mb(n: int) -> str:
    return f"{n / 1e6:.2f} MB" if n >= 1e5 else f"{n:,} B"


def format_summary(s: Summary) -> str:
    lines = [f"model {s.name!r}, format {s.format_version}, from {s.source}"
             + (f", file {_mb(s.file_bytes)}" if s.file_bytes is not None else "")
             + (", AES-GCM encrypted" if s.encrypted else "")]
    for title, items in (("inputs", s.inputs), ("outputs", s.outputs)):
        lines.append(f"{title}" + (f" (signature '{next(iter(s.signatures))}')" if s.signatures else "") + ":")
        lines += [f"  {t.name:<24} {t.dtype:<8} {t.dims_text}" for t in items]
    if s.signatures:
        lines.append(f"signatures: {len(s.signatures)} (LiteSession.SelectSignature)")
        for key, (inputs, outputs) in s.signatures.items():
            lines.append(f"  {key}:")
            lines += [f"    {side:<7} {t.name:<22} {t.dtype:<8} {t.dims_text}"
                      for side, items in (("input", inputs), ("output", outputs)) for t in items]
    lines.append(f"nodes: {sum(s.op_counts.values())}" + (" (bodies included)" if s.bodies else ""))
    lines += [f"  {op:<28} {n:>5}" for op, n in s.op_counts.most_common()]
    lines.append(f"parameters: {s.parameter_count:,}")
    lines += [f"  {dtype:<8} {n:>12,} elements  {_mb(b):>10}" for dtype, (n, b) in sorted(s.parameters.items())]
    if s.quantized:
        lines.append(f"quantized tensors: {len(s.quantized)}")
        groups: dict[tuple[str, int, bool], list[QuantInfo]] = {}
        for q in s.quantized:
            groups.setdefault((q.dtype, q.num_bits, q.channels > 1), []).append(q)
        for (dtype, bits, per_channel), qs in sorted(groups.items()):
            lo, hi = min(q.scale_min for q in qs), max(q.scale_max for q in qs)
            lines.append(f"  {dtype:<6} {bits:>2}-bit {'per channel' if per_channel else 'per tensor ':<11} "
                         f"{len(qs):>5} tensors, scales {lo:.3g} .. {hi:.3g}")
    if s.subgraphs:
        lines.append("subgraphs: " + ", ".join(f"{name} ({n} nodes)" for name, n in s.subgraphs.items()))
    if s.bodies:
        lines.append("control-flow bodies: " + ", ".join(f"{name} ({n} nodes)" for name, n in s.bodies.items()))
    lines.append(f"planned arena: {_mb(s.arena_bytes)}" if s.arena_bytes is not None
                 else f"planned arena: not compiled ({s.arena_error})")
    return "\n".join(lines)


def graph_dot(model: Model) -> str:
    """The graph as Graphviz text: a box per node labelled with its op, edges labelled with tensor shapes."""
    producer = {o: k for k, n in enumerate(model.nodes) for o in n.outputs}
    out = ["digraph model {", "  rankdir=TB; node [shape=box, fontname=Helvetica, fontsize=10];"]
    for i in model.inputs:
        out.append(f'  "t{i}" [shape=ellipse, label="{model.tensors[i].name}"];')
    for k, n in enumerate(model.nodes):
        out.append(f'  "n{k}" [label="{n.op}\\n{n.name}"];')
        for i in n.inputs:
            if i < 0 or model.tensors[i].is_const:
                continue
            source = f"n{producer[i]}" if i in producer else f"t{i}"
            out.append(f'  "{source}" -> "n{k}" [label="{list(model.tensors[i].dims)}", fontsize=8];')
    for i in model.outputs:
        out.append(f'  "o{i}" [shape=ellipse, label="{model.tensors[i].name}"];')
        out.append(f'  "{f"n{producer[i]}" if i in producer else f"t{i}"}" -> "o{i}";')
    return "\n".join(out + ["}"])


def graph_text(model: Model) -> str:
    """The graph as numbered lines `k op name -> shape`, each followed by `<- ...` naming the nodes (by number) or
    graph inputs it reads, unless it reads only the line above it: chains read straight down, branches stand out.
    A control-flow node's bodies follow it, indented, each headed by its inputs and outputs."""
    return "\n".join(_text_lines(model, model.nodes, ""))


def _text_lines(model: Model, nodes: Sequence[NodeDef], indent: str) -> list[str]:
    producer = {o: k for k, n in enumerate(nodes) for o in n.outputs}
    width = len(str(len(nodes)))
    names = [t.name for t in model.tensors]
    lines = []
    for k, n in enumerate(nodes):
        sources = [str(producer[i]) if i in producer else names[i]
                   for i in n.inputs if i >= 0 and not model.tensors[i].is_const]
        shape = list(model.tensors[n.outputs[0]].dims) if n.outputs else []
        reads = "" if sources == [str(k - 1)] else f"  <- {', '.join(sources) or 'constants'}"
        lines.append(f"{indent}{k:>{width}} {n.op} {n.name} -> {shape}{reads}")
        spec = traits(n.op).bodies
        for attr, body in zip(spec.attrs if spec else (), n.bodies):
            lines.append(f"{indent}{' ' * width}   {attr} '{body.name}' ({', '.join(names[i] for i in body.inputs)})"
                         f" -> ({', '.join(names[o] for o in body.outputs)}):")
            lines += _text_lines(model, body.nodes, indent + " " * (width + 5))
    return lines


def write_graph(model: Model, path: Path) -> str:
    """Write `path` (.dot, or .png through Graphviz); returns what was written."""
    dot = graph_dot(model)
    if path.suffix != ".png":
        path.write_text(dot)
        return str(path)
    if shutil.which("dot") is None:
        fallback = path.with_suffix(".dot")
        fallback.write_text(dot)
        return f"{fallback} (Graphviz's dot is not installed, so no PNG: see --text)"
    subprocess.run(["dot", "-Tpng", "-o", str(path)], input=dot.encode(), check=True)
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lite.inspect", description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--graph", type=Path, help="write the graph as .dot or .png")
    parser.add_argument("--text", action="store_true", help="print the graph as numbered text lines")
    parser.add_argument("--decryptKey", help="the hex key of an encrypted model")
    args = parser.parse_args(argv)
    try:
        model = Model.Load(args.model, dec_key=args.decryptKey)
    except LiteError as e:
        print(f"{args.model}: {e} (status {e.status})", file=sys.stderr)
        return 1
    with open(args.model, "rb") as f:
        encrypted = protect.is_encrypted(f.read(len(protect.MAGIC_ENCRYPTED)))
    print(format_summary(summarize(model, os.path.getsize(args.model), encrypted)))
    if args.text:
        print(graph_text(model))
    if args.graph:
        print(f"graph written to {write_graph(model, args.graph)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
