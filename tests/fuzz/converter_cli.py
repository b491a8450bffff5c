"""`python -m tests.fuzz.converter_cli --cases 10000`: mutated ONNX files through `converter_lite` itself (the CLI
entry `converter.cli.main`, in this process), to check that each ends in a status — a converted file or a named
refusal — and never in a traceback or a hang.

Half the mutants are blind byte mutations of a seed (`lite.tools.fuzz.mutate`: malformed protobufs); the other
half edit the parsed model as a careless exporter or a damaged file would: an initializer dropped or pointed at a
missing external-data file, a node reading a later node's output (a cycle), a wrong element type, an absurd or
negative dimension, an unknown or misplaced op type, an input or attribute removed, truncated raw data, an
opset of 0 or from the future. The seeds are small models of several op families (convolution, recurrent,
attention-style matmuls, control flow). Each case has `--timeout` seconds (SIGALRM).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import signal
import sys
import tempfile
import time
import traceback
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from converter.cli import main as converter_lite
from lite.tools.fuzz import CaseTimeout, mutate
from tests.fuzz.seeds import tiny_lenet


def _model(nodes: list, inputs: list, outputs: list, weights: dict[str, np.ndarray], opset: int = 17
           ) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "seed", inputs, outputs, [numpy_helper.from_array(a, n) for n, a in
                                                               weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _info(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def seeds() -> dict[str, onnx.ModelProto]:
    """Small models: LeNet-shaped, an LSTM, an attention-style block with dynamic dims, an If."""
    rng = np.random.default_rng(0)

    def w(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)
    lstm = _model([helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "h"], hidden_size=4),
                   helper.make_node("Squeeze", ["h", "axes"], ["out"])],
                  [_info("x", [3, 1, 5])], [_info("out", [1, 4])],
                  {"W": w(1, 16, 5), "R": w(1, 16, 4), "B": w(1, 32), "axes": np.array([0], np.int64)})
    attention = _model([helper.make_node("MatMul", ["x", "wq"], ["q"]), helper.make_node("MatMul", ["x", "wk"], ["k"]),
                        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
                        helper.make_node("MatMul", ["q", "kt"], ["s"]),
                        helper.make_node("Softmax", ["s"], ["p"], axis=-1),
                        helper.make_node("MatMul", ["p", "x"], ["a"]),
                        helper.make_node("LayerNormalization", ["a", "g", "b"], ["out"], axis=-1)],
                       [_info("x", ["batch", "seq", 8])], [_info("out", ["batch", "seq", 8])],
                       {"wq": w(8, 8), "wk": w(8, 8), "g": w(8), "b": w(8)})
    branch = [helper.make_graph([helper.make_node(op, ["x"], [f"{op}_out"])], op, [], [_info(f"{op}_out", [2, 3])])
              for op in ("Relu", "Sigmoid")]
    control = _model([helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
                      helper.make_node("Greater", ["total", "zero"], ["cond"]),
                      helper.make_node("If", ["cond"], ["out"], then_branch=branch[0], else_branch=branch[1])],
                     [_info("x", [2, 3])], [_info("out", [2, 3])], {"zero": np.zeros((), np.float32)})
    return {"lenet": tiny_lenet(), "lstm": lstm, "attention": attention, "if": control}


# ---- structural mutations: each edits a parsed copy in place ---------------------------------------------------
Edit = Callable[[onnx.ModelProto, np.random.Generator], str]


def _pick(items, rng: np.random.Generator):
    return items[int(rng.integers(len(items)))] if len(items) else None


def _drop_initializer(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    init = _pick(m.graph.initializer, rng)
    if init is None:
        return "no initializer to drop"
    m.graph.initializer.remove(init)
    return f"drop initializer {init.name}"


def _missing_external_data(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    init = _pick(m.graph.initializer, rng)
    if init is None:
        return "no initializer to externalize"
    location = _pick(["missing.bin", "../../etc/passwd", "/nonexistent/w.bin", "", "a" * 300], rng)
    init.ClearField("raw_data")
    init.ClearField("float_data")
    init.ClearField("int64_data")
    init.data_location = TensorProto.EXTERNAL
    del init.external_data[:]
    for key, value in (("location", location), ("offset", str(int(rng.integers(-8, 1 << 40)))),
                       ("length", str(int(rng.integers(-8, 1 << 40))))):
        if rng.random() < 0.8:
            init.external_data.add(key=key, value=value)
    return f"initializer {init.name} in external file {location!r}"


def _cycle(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    nodes = m.graph.node
    if len(nodes) < 2:
        node = nodes[0]
        node.input[0] = node.output[0]
        return f"node {node.op_type} reads its own output"
    i, j = sorted(int(k) for k in rng.choice(len(nodes), 2, replace=False))
    if not nodes[i].input:
        return "no input to rewire"
    nodes[i].input[int(rng.integers(len(nodes[i].input)))] = nodes[j].output[0]
    return f"node {i} reads node {j}'s output"


def _wrong_type(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    new = int(rng.integers(0, 26))
    targets = list(m.graph.initializer) + [v.type.tensor_type for v in (*m.graph.input, *m.graph.output)]
    target = _pick(targets, rng)
    if isinstance(target, TensorProto):
        target.data_type = new
    else:
        target.elem_type = new
    return f"element type {new}"


def _absurd_shape(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    value = int(_pick([0, -1, -7, 1 << 31, 1 << 40, (1 << 63) - 1, 3], rng))
    if rng.random() < 0.5 and m.graph.initializer:
        init = _pick(m.graph.initializer, rng)
        if init.dims:
            init.dims[int(rng.integers(len(init.dims)))] = value
        else:
            init.dims.append(value)
        return f"initializer {init.name} dim {value}"
    dims = _pick(m.graph.input, rng).type.tensor_type.shape.dim
    if not dims:
        return "no dim"
    dim = dims[int(rng.integers(len(dims)))]
    dim.dim_value = value
    return f"input dim {value}"


def _op_type(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    node = _pick(m.graph.node, rng)
    node.op_type = str(_pick(["Conv", "LSTM", "Reshape", "Gather", "Loop", "Scan", "If", "Attention", "NoSuchOp",
                              "QLinearConv", "Resize", "TopK", "Einsum", ""], rng))
    if rng.random() < 0.3:
        node.domain = str(_pick(["com.microsoft", "com.acme", "ai.onnx.ml"], rng))
    return f"op type {node.op_type} in {node.domain or 'the default domain'}"


def _drop_part(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    node = _pick(m.graph.node, rng)
    if node.attribute and rng.random() < 0.5:
        attr = _pick(node.attribute, rng)
        node.attribute.remove(attr)
        return f"drop attribute {attr.name} of {node.op_type}"
    if node.input:
        k = int(rng.integers(len(node.input)))
        node.input[k] = "" if rng.random() < 0.5 else "nowhere"
        return f"input {k} of {node.op_type} emptied or unknown"
    del node.output[:]
    return f"outputs of {node.op_type} dropped"


def _truncate_raw(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    init = _pick(m.graph.initializer, rng)
    if init is None or init.data_location == TensorProto.EXTERNAL or init.data_type != TensorProto.FLOAT:
        return "no initializer to resize"
    raw = init.raw_data or np.asarray(init.float_data, np.float32).tobytes()
    init.ClearField("float_data")
    init.ClearField("int64_data")
    init.raw_data = raw[:int(rng.integers(len(raw) + 1))] + bytes(int(rng.integers(0, 3)))
    return f"raw data of {init.name} resized"


def _opset(m: onnx.ModelProto, rng: np.random.Generator) -> str:
    version = int(_pick([0, 1, 6, 99999, -1], rng))
    m.opset_import[0].version = version
    return f"opset {version}"


EDITS: tuple[Edit, ...] = (_drop_initializer, _missing_external_data, _cycle, _wrong_type, _absurd_shape, _op_type,
                           _drop_part, _truncate_raw, _opset)


def mutant(seed: onnx.ModelProto, data: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """A blind byte mutation of `data` or one to three structural edits of `seed`."""
    if rng.random() < 0.5:
        return mutate(data, rng)
    model = onnx.ModelProto()
    model.CopyFrom(seed)
    what = [_pick(EDITS, rng)(model, rng) for _ in range(int(rng.integers(1, 4)))]
    return model.SerializeToString(), "; ".join(what)


# ---- the campaign --------------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    cases: int = 0
    converted: int = 0
    statuses: Counter = field(default_factory=Counter)      # refusals by status code
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    slowest_s: float = 0.0


def _alarm(signum: int, frame: object) -> None:
    raise CaseTimeout()


def campaign(cases: int, seed: int = 0, timeout_s: float = 10.0) -> Outcome:
    """`cases` mutants, spread over the seeds, each converted by `converter_lite` into a scratch folder."""
    rng = np.random.default_rng(seed)
    models = list(seeds().items())
    serialized = [m.SerializeToString() for _, m in models]
    outcome = Outcome()
    previous = signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory(prefix="converter-fuzz-") as folder:
        source, target = Path(folder) / "model.onnx", Path(folder) / "model"
        try:
            for case in range(cases):
                k = case % len(models)
                data, what = mutant(models[k][1], serialized[k], rng)
                what = f"case {case} ({models[k][0]}: {what})"
                source.write_bytes(data)
                started = time.perf_counter()
                signal.setitimer(signal.ITIMER_REAL, timeout_s)
                try:
                    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                            contextlib.redirect_stderr(io.StringIO()):
                        warnings.simplefilter("ignore")
                        status = converter_lite(["--fmk=ONNX", f"--modelFile={source}", f"--outputFile={target}"])
                    if status == 0:
                        outcome.converted += 1
                    else:
                        outcome.statuses[status] += 1
                except CaseTimeout:
                    outcome.hangs.append(what)
                except BaseException as e:                  # what converter_lite lets escape: a traceback
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    outcome.tracebacks.append(f"{what}: {type(e).__name__}: {e}\n{traceback.format_exc(limit=-3)}")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                outcome.cases += 1
                outcome.slowest_s = max(outcome.slowest_s, time.perf_counter() - started)
        finally:
            signal.signal(signal.SIGALRM, previous)
    return outcome


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.converter_cli", description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds per case")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    outcome = campaign(args.cases, args.seed, args.timeout)
    refused = sum(outcome.statuses.values())
    print(f"{outcome.cases} mutated ONNX files through converter_lite in {time.perf_counter() - started:.0f} s: "
          f"{outcome.converted} converted, {refused} refused with a status "
          f"({', '.join(f'{s}: {n}' for s, n in outcome.statuses.most_common())}), "
          f"{len(outcome.tracebacks)} tracebacks, {len(outcome.hangs)} hangs; slowest case {outcome.slowest_s:.2f} s")
    for line in (outcome.tracebacks + [f"{h}: no status within {args.timeout} s" for h in outcome.hangs])[:20]:
        print("  " + line)
    return 1 if outcome.tracebacks or outcome.hangs else 0


if __name__ == "__main__":
    sys.exit(main())
