"""No import cycles among the project's modules, counting imports inside functions too (they only hide a cycle).

`from package import name` depends on the submodule `package.name` when there is one, else on `package`."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("schema", "lite", "converter", "models")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            deps.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            deps.update(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names)
    return {d for d in deps if d in modules and d != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_through_others():
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert _cycles(graph) == []


def test_the_runtime_never_imports_the_converter_models_or_onnx():
    modules = _modules()
    for name, path in modules.items():
        if name.split(".")[0] in ("lite", "schema"):
            tree = ast.parse(path.read_text())
            imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
            assert not {m.split(".")[0] for m in imported} & {"converter", "models", "onnx"}, name
