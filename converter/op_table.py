"""Write `docs/ops.md`, the op table, from the registries: `python -m converter.op_table` (`--check` only
compares). For every op of ours: its kernel module, fp32 and int8 kernels, their compiled siblings, the test files
that exercise it, the ONNX ops and TFLite builtins whose importer rules emit it, its bprop rule and the gradient
kernels that rule emits, and its traits; then every ONNX op and every TFLite builtin with its rule, and the TFLite
builtins that are refused, with the reason. Which ops a rule (or bprop rule) emits is read from the rule's source:
the op-name strings in it and in the module-level helpers and tables it uses, so the table follows the code without
a second list to maintain. The test files are found by scanning `tests/` (every depth) for the op's name in quotes
or its kernel modules' names.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import re
import sys
import textwrap
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable

from converter.frontends.onnx import rules as _onnx_rules  # noqa: F401  (registers every importer rule)
from converter.frontends.onnx.registry import IMPORTERS
from converter.frontends.tflite import importer as tflite_importer
from converter.frontends.tflite.reader import builtin_names
from converter.frontends.tflite.registry import IMPORTERS as TFLITE_IMPORTERS
from converter.frontends.tflite.registry import QUANT as TFLITE_QUANT
from converter.frontends.tflite.variables import RESOURCE_OPS
from converter.train.bprop import RULES
from lite import dtypes
from lite.kernel import ANY, REFERENCE, registered
from lite.traits import non_default, traits

ROOT = Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "docs" / "ops.md"
TESTS = ROOT / "tests"
COMMAND = "python -m converter.op_table"
GRAD_PACKAGE = "lite.kernels.grad"


def _module_path(obj: Any) -> str:
    return Path(sys.modules[obj.__module__].__file__).resolve().relative_to(ROOT).as_posix()


@lru_cache(maxsize=None)
def _module_tree(module: ModuleType) -> dict[str, ast.AST]:
    """Top-level functions and assignments of `module`, by name."""
    tree = ast.parse(inspect.getsource(module))
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
    return found


def _walk(node: ast.AST) -> Iterable[ast.AST]:
    """`ast.walk` without decorators and docstrings."""
    skipped = set()
    for n in ast.walk(node):
        if isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            skipped.update(id(d) for dec in n.decorator_list for d in ast.walk(dec))
        if (isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.Module)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)):
            skipped.add(id(n.body[0].value))
    return [n for n in ast.walk(node) if id(n) not in skipped]


def _strings(node: ast.AST, source_op: str) -> Iterable[str]:
    """The op names `node` spells: its string constants, and f"{<op>}Suffix" strings, which name
    `source_op` + "Suffix" (`f"{g.node.op}Grad"`)."""
    skipped: set[int] = set()
    for n in _walk(node):
        if id(n) in skipped:
            continue
        if isinstance(n, ast.JoinedStr):
            skipped.update(id(v) for v in n.values)
            if (len(n.values) == 2 and isinstance(n.values[0], ast.FormattedValue)
                    and isinstance(n.values[1], ast.Constant)):
                yield source_op + n.values[1].value
        elif isinstance(n, ast.Constant) and isinstance(n.value, str):
            yield n.value


def _emitted(fn: Callable[..., Any], source_op: str, ops: set[str]) -> list[str]:
    """The ops of `ops` that rule `fn` (for `source_op`) may emit: op names spelled in it and in the top-level
    helpers and tables of its module that it refers to (a table keyed by `source_op` gives that entry only), in
    the converter's functions it imports (shared lowerings) and in theirs, and `source_op` itself when the rule
    emits the op type it is given."""
    rule = _module_tree(sys.modules[fn.__module__])[fn.__name__]
    seen, found, todo = {(fn.__module__, fn.__name__)}, [], [(rule, sys.modules[fn.__module__])]
    while todo:
        node, module = todo.pop()
        top = _module_tree(module)
        for s in _strings(node, source_op):
            if s in ops and s not in found:
                found.append(s)
        for name in sorted({n.id for n in _walk(node) if isinstance(n, ast.Name)}):
            if (module.__name__, name) in seen:
                continue
            seen.add((module.__name__, name))
            target = top.get(name)
            imported = getattr(module, name, None)
            if target is None and inspect.isfunction(imported) and imported.__module__.startswith("converter."):
                todo.append((_module_tree(sys.modules[imported.__module__])[imported.__name__],
                             sys.modules[imported.__module__]))
                continue
            if isinstance(target, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == source_op
                                                    for k in target.keys):
                todo += [(v, module) for k, v in zip(target.keys, target.values)
                         if isinstance(k, ast.Constant) and k.value == source_op]
            elif target is not None:
                todo.append((target, module))
    emits_own = any(isinstance(n, ast.Attribute) and n.attr == "op_type" and isinstance(p, ast.Call)
                    and p.args and p.args[0] is n for p in ast.walk(rule) for n in ast.walk(p))
    if source_op in ops and emits_own and source_op not in found:
        found.insert(0, source_op)
    return found


def _kernels() -> dict[str, dict[str, Any]]:
    """op -> its kernel module, fp32 kernel's data types, int8 kernel and compiled siblings, from the kernel
    registry."""
    table: dict[str, dict[str, Any]] = {}
    for (op, type_id, quantized, backend), cls in sorted(registered().items(),
                                                         key=lambda kv: (kv[0][0], kv[0][3] != REFERENCE,
                                                                         kv[0][2], kv[0][1])):
        row = table.setdefault(op, {"module": None, "types": [], "int8": None, "siblings": {}})
        if backend != REFERENCE:
            kind = "int8" if quantized else "any" if type_id == ANY else dtypes.type_name(type_id).lower()
            row["siblings"].setdefault(_module_path(cls), []).append(kind)
        elif quantized:
            row["int8"] = _module_path(cls)
        else:
            row["module"] = row["module"] or _module_path(cls)
            row["types"].append("any" if type_id == ANY else dtypes.type_name(type_id).lower())
    return table


def _siblings_cell(row: dict[str, Any]) -> str:
    return _cell(f"`{path}` ({', '.join(kinds)})" for path, kinds in row["siblings"].items())


@lru_cache(maxsize=None)
def _test_texts() -> dict[str, str]:
    """Every test file under `tests/`, at any depth, by its path relative to `tests/`."""
    return {p.relative_to(TESTS).as_posix(): p.read_text() for p in sorted(TESTS.rglob("test_*.py"))}


def _tests(op: str, row: dict[str, Any]) -> list[str]:
    """The test files that exercise `op`'s kernels: they name the op in quotes, import or name one of its kernel
    modules, or are named after one (`test_<module>.py`)."""
    paths = [p for p in (row["module"], row["int8"], *row["siblings"]) if p]
    dotted = [p.removesuffix(".py").replace("/", ".") for p in paths]
    names = [rf"""["']{re.escape(op)}["']"""] + [re.escape(p) for p in paths + dotted] + [
        rf"from {re.escape(d.rpartition('.')[0])} import [^\n]*\b{d.rpartition('.')[2]}\b" for d in dotted]
    found = re.compile("|".join(names))
    stems = {f"test_{Path(p).stem}.py" for p in paths}
    return [name for name, text in _test_texts().items() if Path(name).name in stems or found.search(text)]


def _cell(items: Iterable[str]) -> str:
    return ", ".join(items) or "—"


def _traits_cell(op: str) -> str:
    fields = non_default(traits(op))
    parts = []
    for name, value in fields.items():
        if name == "layout":
            extra = {k: v for k, v in vars(value).items() if k != "kind" and v != type(value)().__dict__[k]}
            parts.append(f"layout={value.kind}" + "".join(f" {k}={v}" for k, v in extra.items()))
        elif name == "bodies":
            parts.append("bodies=" + "+".join(value.attrs) + "".join(
                f" {k}={v}" for k, v in vars(value).items() if k != "attrs" and v))
        elif name == "train":
            parts.append("train(" + ", ".join(f"{k}={v}" for k, v in vars(value).items() if v) + ")")
        else:
            parts.append(name if value is True else f"{name}={value}")
    return "; ".join(parts) or "—"


def _sources(importers: dict[str, Callable[..., Any]], ops: set[str]) -> dict[str, list[str]]:
    """our op -> the source ops whose rules emit it."""
    sources: dict[str, list[str]] = {}
    for source_op, rule in sorted(importers.items()):
        for op in _emitted(rule, source_op, ops):
            sources.setdefault(op, []).append(source_op)
    return sources


def _domain(onnx_op: str) -> str:
    """The domain of an ONNX importer key: the qualified name's prefix, `ai.onnx` for a bare name."""
    return onnx_op.rpartition(".")[0] or "ai.onnx"


def _tflite_refused() -> list[tuple[str, str]]:
    """(builtin or family, reason) for every TFLite builtin without an importer rule; the StableHLO family is
    one row."""
    missing = [name for name in builtin_names() if name not in TFLITE_IMPORTERS and name not in RESOURCE_OPS]
    stablehlo = [n for n in missing if n.startswith(tflite_importer.STABLEHLO)]
    rows = [(n, tflite_importer.refusal(n)) for n in missing if n not in stablehlo]
    if stablehlo:
        rows.append((f"{tflite_importer.STABLEHLO}* ({len(stablehlo)} ops)", tflite_importer.refusal(stablehlo[0])))
    return sorted(rows)


def render() -> str:
    kernels = _kernels()
    ops = set(kernels)
    sources, tflite_sources = _sources(IMPORTERS, ops), _sources(TFLITE_IMPORTERS, ops)
    forward = sorted(op for op, k in kernels.items() if not k["module"] or "/grad/" not in k["module"])
    lines = [
        "# Op table",
        "",
        f"Generated by `{COMMAND}` from the kernel, trait, importer and bprop registries; do not edit by hand",
        "(`tests/converter/test_op_table.py` fails when it is stale). \"Where is op X handled?\": find its row.",
        "",
        "## Our ops",
        "",
        "| op | kernel module | fp32 / generic kernel | int8 kernel | compiled | tests | ONNX sources | TFLite sources "
        "| bprop rule | gradient kernels | traits |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for op in forward:
        k = kernels[op]
        rule = RULES.get(op)
        grads = _emitted(rule, op, ops) if rule else []
        lines.append(" | ".join([
            f"| `{op}`", f"`{k['module']}`" if k["module"] else "—", _cell(k["types"]),
            f"`{k['int8']}`" if k["int8"] else "—", _siblings_cell(k), _cell(_tests(op, k)),
            _cell(sources.get(op, [])), _cell(tflite_sources.get(op, [])),
            f"`{_module_path(rule)}:{rule.__name__}`" if rule else "—",
            _cell(f"{g} (`{kernels[g]['module']}`)" for g in grads if g != op), _traits_cell(op)]) + " |")
    training = sorted(op for op in kernels if op not in forward)
    lines += ["", "## Training kernels (gradients, losses, optimizers)", "",
              "| op | module | compiled | tests | read by bprop of |", "|---|---|---|---|---|"]
    users = {g: [op for op in sorted(RULES) if g in _emitted(RULES[op], op, ops)] for g in training}
    for op in training:
        k = kernels[op]
        lines.append(f"| `{op}` | `{k['module']}` | {_siblings_cell(k)} | {_cell(_tests(op, k))} | "
                     f"{_cell(users[op])} |")
    lines += ["", "## ONNX ops", "", "By domain: `ai.onnx` (the default), then the others (`com.microsoft`: "
              "onnxruntime's contrib ops), by their qualified names.", "",
              "| ONNX op | importer rule | domain | emits |", "|---|---|---|---|"]
    for onnx_op, rule in sorted(IMPORTERS.items(), key=lambda item: (_domain(item[0]) != "ai.onnx", item[0])):
        lines.append(f"| `{onnx_op}` | `{_module_path(rule)}:{rule.__name__}` | {_domain(onnx_op)} | "
                     f"{_cell(_emitted(rule, onnx_op, ops))} |")
    refused = _tflite_refused()
    lines += ["", "## TFLite builtins", "",
              f"{len(TFLITE_IMPORTERS)} builtins have an importer rule (`converter/frontends/tflite/rules/`). Quantized "
              "tensors: `int8` rules map them onto our int8 kernels, `same` rules pass them through when the output "
              "keeps the input's scale and zero point, `float` rules run between a dequantize and a quantize.", "",
              "| TFLite builtin | importer rule | quantized | emits |", "|---|---|---|---|"]
    for builtin, rule in sorted(TFLITE_IMPORTERS.items()):
        lines.append(f"| `{builtin}` | `{_module_path(rule)}:{rule.__name__}` | {TFLITE_QUANT[builtin]} | "
                     f"{_cell(_emitted(rule, builtin, ops))} |")
    lines += [f"| `{builtin}` | `converter/frontends/tflite/variables.py` (a session-state tensor) | float | "
              f"{'Assign' if builtin == 'ASSIGN_VARIABLE' else '—'} |" for builtin in RESOURCE_OPS]
    lines += ["", "## TFLite builtins not supported", "",
              "Refused with `RET_NOT_SUPPORT` naming the op, the node and this reason.", "",
              "| TFLite builtin | why |", "|---|---|"]
    lines += [f"| `{builtin}` | {reason} |" for builtin, reason in refused]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=textwrap.dedent(__doc__.split("\n\n")[0]))
    parser.add_argument("--check", action="store_true", help="only report whether docs/ops.md is current")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUTPUT.exists() and OUTPUT.read_text() == text
        print("docs/ops.md is current" if current else f"docs/ops.md is stale: run `{COMMAND}`")
        return 0 if current else 1
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
