"""Tensor dumps and their comparison: find the first node where two runs of a model part ways.

    dump = lite.Dump("dump_dir", nodes="conv|fc", saved_data="tensor")   # or lite.Dump.from_config("dump.json")
    dump.run(session)                                      # RunGraph with the dump's before/after callbacks
    python -m lite.dump compare dump_a dump_b              # per tensor: cosine, SQNR; the first divergence

A dump folder holds `statistic.jsonl`, one line per dumped tensor and run: iteration, node, op, `input` or
`output` and its slot, tensor name, shape, dtype, min, max, mean, std, NaN and Inf counts and the MD5 of the bytes
(MindSpore's Dump records the same statistics, so equal MD5s prove bit-equal tensors); with `saved_data` `tensor`
or `full` each tensor is also saved as `<iteration>/<tensor>.<input|output>.npy` (inputs are taken before their
node runs, since in-place kernels overwrite them). The config file is MindSpore's JSON form:
`{"common_dump_settings": {"dump_mode": 0|1, "path": ..., "net_name": ..., "iteration": "all"|"0|2-4",
"input_output": 0|1|2, "kernels": [...], "op_types": [...], "saved_data": "statistic"|"tensor"|"full"}}` —
dump_mode 1 dumps only the nodes that `kernels` (names or regular expressions) match; input_output 0 dumps both,
1 inputs, 2 outputs. `benchmark_lite --dump=<config or folder>` and the MINDSPORE_DUMP_CONFIG variable use it.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from lite.session import CallBackParam, LiteSession
from lite.status import ParamInvalidError
from lite.tensor import MSTensor

STATISTICS = "statistic.jsonl"
SAVED = ("statistic", "tensor", "full")


def _iterations(spec: str) -> set[int] | None:
    """MindSpore's iteration selector: "all", or "0|3|5-8"."""
    if spec.strip() in ("", "all"):
        return None
    chosen: set[int] = set()
    try:
        for part in spec.split("|"):
            lo, _, hi = part.partition("-")
            chosen.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise ParamInvalidError(f"dump iteration must be 'all' or like '0|3|5-8', got '{spec}'") from None
    return chosen


def statistics(array: np.ndarray) -> dict:
    """Shape, dtype, min, max, mean, std, NaN and Inf counts (over the finite values) and MD5 of the bytes."""
    data = np.ascontiguousarray(array)
    record = {"shape": list(data.shape), "dtype": str(data.dtype),
              "md5": hashlib.md5(data.tobytes()).hexdigest(), "nan": 0, "inf": 0}
    values = data.astype(np.float64) if data.dtype.kind in "biuf" else None
    if values is None or values.size == 0:
        return record | {"min": None, "max": None, "mean": None, "std": None}
    finite = np.isfinite(values)
    record["nan"], record["inf"] = int(np.isnan(values).sum()), int(np.isinf(values).sum())
    good = values[finite]
    return record | ({"min": float(good.min()), "max": float(good.max()), "mean": float(good.mean()),
                      "std": float(good.std())} if good.size else {"min": None, "max": None, "mean": None,
                                                                     "std": None})


def _file_name(tensor: str, side: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", tensor)[:180] + f".{side}.npy"


class Dump:
    """RunGraph callbacks (`before`: inputs, `after`: outputs) that record the tensors of the nodes they select,
    one JSON line per tensor."""

    def __init__(self, path: str | Path, *, nodes: str | None = None, op_types: Iterable[str] | None = None,
                 input_output: int = 0, saved_data: str = "statistic", iterations: str = "all"):
        if saved_data not in SAVED:
            raise ParamInvalidError(f"dump saved_data must be one of {', '.join(SAVED)}, got '{saved_data}'")
        if input_output not in (0, 1, 2):
            raise ParamInvalidError(f"dump input_output must be 0 (both), 1 (inputs) or 2 (outputs), "
                                    f"got {input_output}")
        try:
            self.nodes = re.compile(nodes) if nodes else None
        except re.error as e:
            raise ParamInvalidError(f"dump kernels: '{nodes}' is not a regular expression: {e}") from None
        self.path = Path(path)
        self.op_types = set(op_types) if op_types else None
        self.sides = {0: ("input", "output"), 1: ("input",), 2: ("output",)}[input_output]
        self.save_tensors = saved_data != "statistic"
        self.iterations = _iterations(iterations)
        self.iteration = 0
        self.path.mkdir(parents=True, exist_ok=True)
        self._log = open(self.path / STATISTICS, "a", encoding="utf-8")

    @classmethod
    def from_config(cls, config: str | Path) -> "Dump":
        """A dump as MindSpore's JSON dump config says (see the module docstring); relative paths are taken
        from the config file's folder."""
        try:
            settings = json.loads(Path(config).read_text(encoding="utf-8"))["common_dump_settings"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ParamInvalidError(f"dump config '{config}' is not a MindSpore dump config "
                                    f"(JSON with common_dump_settings): {e}") from None
        known = {"dump_mode", "path", "net_name", "iteration", "input_output", "kernels", "op_types",
                 "saved_data", "support_device"}
        unknown = sorted(set(settings) - known)
        if unknown:
            raise ParamInvalidError(f"dump config '{config}': unknown key '{unknown[0]}'")
        kernels = settings.get("kernels", []) if settings.get("dump_mode", 0) == 1 else []
        folder = Path(config).parent / settings.get("path", "dump") / settings.get("net_name", "")
        return cls(folder, nodes="|".join(f"(?:{k})" for k in kernels) or None, op_types=settings.get("op_types"),
                   input_output=int(settings.get("input_output", 0)),
                   saved_data=settings.get("saved_data", "statistic"),
                   iterations=str(settings.get("iteration", "all")))

    def selects(self, param: CallBackParam) -> bool:
        return ((self.nodes is None or self.nodes.search(param.node_name) is not None)
                and (self.op_types is None or param.node_type in self.op_types))

    def _dump(self, side: str, tensors: list[MSTensor], param: CallBackParam) -> bool:
        if side in self.sides and (self.iterations is None or self.iteration in self.iterations) \
                and self.selects(param):
            for slot, t in enumerate(tensors):
                self.record(param, side, slot, t.tensor_name(), t.MutableData(), t.quant_params())
        return True

    def before(self, inputs: list[MSTensor], outputs: list[MSTensor], param: CallBackParam) -> bool:
        """RunGraph's `before` callback: a node's inputs, before an in-place kernel may overwrite them."""
        return self._dump("input", inputs, param)

    def after(self, inputs: list[MSTensor], outputs: list[MSTensor], param: CallBackParam) -> bool:
        """RunGraph's `after` callback: a node's outputs."""
        return self._dump("output", outputs, param)

    def record(self, param: CallBackParam, side: str, slot: int, tensor: str, data: np.ndarray,
               quant_params: Sequence[tuple[float, int]] = ()) -> None:
        """Write one tensor's line (and file); also how another engine's run is dumped in this format. A
        quantized tensor's line keeps its (scale, zero_point) pairs, so `compare` can dequantize it."""
        line = {"iteration": self.iteration, "node": param.node_name, "op": param.node_type, "io": side,
                "slot": slot, "tensor": tensor, **statistics(data)}
        if quant_params:
            line["quant"] = [[float(s), int(z)] for s, z in quant_params]
        if self.save_tensors:
            folder = self.path / str(self.iteration)
            folder.mkdir(exist_ok=True)
            np.save(folder / _file_name(tensor, side), data)
        self._log.write(json.dumps(line) + "\n")

    def run(self, session: LiteSession) -> int:
        """One `RunGraph` with this dump's callbacks; the next run is the next iteration."""
        try:
            return session.RunGraph(before=self.before, after=self.after)
        finally:
            self.iteration += 1
            self._log.flush()

    def close(self) -> None:
        self._log.close()

    def __enter__(self) -> "Dump":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- comparison ----------------------------------------------------------------------------------------------
def load(path: str | Path) -> list[dict]:
    """The records of a dump folder (or of its statistic.jsonl), in the order they were written."""
    path = Path(path)
    file = path / STATISTICS if path.is_dir() else path
    try:
        return [json.loads(line) for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, ValueError) as e:
        raise ParamInvalidError(f"'{path}' is not a dump: {e}") from None


def _tensor(folder: Path, record: dict) -> np.ndarray | None:
    """The saved tensor of `record`, dequantized when it is a per-tensor quantized one (a float vs int8 compare
    then compares real values)."""
    file = folder / str(record["iteration"]) / _file_name(record["tensor"], record["io"])
    if not file.exists():
        return None
    data = np.load(file)
    if len(record.get("quant", ())) == 1:
        scale, zero_point = record["quant"][0]
        return (data.astype(np.float64) - zero_point) * scale
    return data


def _channels_first(x: np.ndarray) -> np.ndarray:
    """NHWC (or NWC, NDHWC) -> NCHW: the last axis moves to position 1."""
    return np.moveaxis(x, -1, 1) if x.ndim >= 3 else x


def _aligned(a: np.ndarray, a_nhwc: bool, b: np.ndarray, b_nhwc: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Both tensors in one layout: a converted model's NHWC tensors (named `<name>_nhwc`) are moved to their
    source's channels-first layout when the other side is not NHWC."""
    if a_nhwc != b_nhwc:
        a, b = (_channels_first(a), b) if a_nhwc else (a, _channels_first(b))
    if a.shape == b.shape:
        return a, b
    return (a, b.reshape(a.shape)) if a.size == b.size else None


def similarity(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(cosine, SQNR in dB) of `b` against the reference `a`; equal tensors give (1, inf)."""
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    noise = float(np.sum((x - y) ** 2))
    signal = float(np.sum(x * x))
    norms = math.sqrt(signal * float(np.sum(y * y)))
    cosine = 1.0 if noise == 0 else float(x @ y / norms) if norms else 0.0
    sqnr = math.inf if noise == 0 else 10 * math.log10(signal / noise) if signal else -math.inf
    return cosine, sqnr


_NHWC_FORM = re.compile(r"^(.*?)_nhwc(?:_\d+)?$")   # the converter's name for a tensor's NHWC form (to_nhwc)


def source_name(tensor: str) -> str:
    """The source model's name of a tensor: `<name>_nhwc` is the NHWC form of `<name>`."""
    match = _NHWC_FORM.match(tensor)
    return match.group(1) if match else tensor


@dataclass
class Row:
    node: str
    op: str
    tensor: str
    identical: bool
    cosine: float | None
    sqnr: float | None
    diverges: bool


def _statistics_differ(a: dict, b: dict, tolerance: float = 1e-3) -> bool:
    """Whether min, max, mean or std differ by more than `tolerance` of the reference's spread (or NaN/Inf
    counts differ at all): the verdict when the tensors themselves were not saved."""
    if (a["nan"], a["inf"]) != (b["nan"], b["inf"]):
        return True
    keys = ("min", "max", "mean", "std")
    if any(a[k] is None or b[k] is None for k in keys):
        return any(a[k] != b[k] for k in keys)
    spread = max(a["max"] - a["min"], 1e-12)
    return any(abs(a[k] - b[k]) > tolerance * spread for k in keys)


def compare(reference: str | Path, other: str | Path, min_cosine: float = 0.999, min_sqnr: float = 40.0,
            iteration: int = 0) -> list[Row]:
    """The output tensors both dumps hold (matched by their source model's name, so a converted model's NHWC
    tensors meet their NCHW originals and are compared transposed), in the reference's order. A tensor
    diverges when its bytes differ and, with both tensors saved, its cosine or SQNR falls below the bounds;
    with statistics alone, when its min, max, mean or std differs by more than 1e-3 of the reference's spread."""
    ref_dir, other_dir = Path(reference), Path(other)
    theirs = {source_name(r["tensor"]): r for r in load(other_dir)
              if r["io"] == "output" and r["iteration"] == iteration}
    rows = []
    for mine in load(ref_dir):
        if mine["io"] != "output" or mine["iteration"] != iteration or source_name(mine["tensor"]) not in theirs:
            continue
        peer = theirs[source_name(mine["tensor"])]
        pair = None
        a, b = _tensor(ref_dir, mine), _tensor(other_dir, peer)
        if a is not None and b is not None:
            pair = _aligned(a, mine["tensor"] != source_name(mine["tensor"]), b,
                            peer["tensor"] != source_name(peer["tensor"]))
        identical = mine["md5"] == peer["md5"] or (pair is not None and np.array_equal(*pair))
        cosine = sqnr = None
        if identical:
            diverges = False
        elif pair is not None:
            cosine, sqnr = similarity(*pair)
            diverges = cosine < min_cosine or sqnr < min_sqnr
        else:
            diverges = _statistics_differ(mine, peer)
        rows.append(Row(mine["node"], mine["op"], mine["tensor"], identical, cosine, sqnr, diverges))
    return rows


def first_divergence(rows: Sequence[Row]) -> Row | None:
    return next((r for r in rows if r.diverges), None)


def format_rows(rows: Sequence[Row]) -> str:
    lines = [f"{'node':<40} {'op':<16} {'cosine':>10} {'SQNR dB':>9}  verdict"]
    for r in rows:
        cos = "-" if r.cosine is None else f"{r.cosine:.6f}"
        sqnr = "inf" if r.identical else "-" if r.sqnr is None else f"{r.sqnr:.2f}"
        verdict = "identical" if r.identical else "DIVERGES" if r.diverges else "close"
        lines.append(f"{r.node[:40]:<40} {r.op[:16]:<16} {cos:>10} {sqnr:>9}  {verdict}")
    first = first_divergence(rows)
    lines.append(f"first divergence: node '{first.node}' ({first.op}), tensor '{first.tensor}'" if first
                 else f"no divergence among {len(rows)} common tensors")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lite.dump", description="Compare two tensor dumps.")
    sub = parser.add_subparsers(dest="command", required=True)
    cmp = sub.add_parser("compare", help="per tensor cosine and SQNR, and the first node where they diverge")
    cmp.add_argument("reference")
    cmp.add_argument("other")
    cmp.add_argument("--min-cosine", type=float, default=0.999)
    cmp.add_argument("--min-sqnr", type=float, default=40.0)
    cmp.add_argument("--iteration", type=int, default=0)
    args = parser.parse_args(argv)
    rows = compare(args.reference, args.other, args.min_cosine, args.min_sqnr, args.iteration)
    if not rows:
        print("the dumps share no output tensor (compare dumps of the same model)", file=sys.stderr)
        return 1
    print(format_rows(rows))
    return 1 if first_divergence(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
