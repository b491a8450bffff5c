"""Kernel modules load on demand: `import lite` imports none of them (nor numba), a session imports only the
modules of its graph's ops, `lite.kernels.MODULES` names exactly what each module registers and declares, and
numba starts without the packages no compiled kernel needs.
Each check runs in a fresh interpreter, whose imports this process's earlier tests cannot have made."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import lite
from converter import convert
from lite.kernel import ENV, create_kernel, kernels_of
from lite.kernels import MODULES
from lite.model import Model
from lite.status import NotSupportedError
from tests.util import small_cnn

ROOT = Path(__file__).resolve().parents[2]


def _fresh(code: str) -> object:
    """What `code` prints (one JSON value) when run in a new interpreter at the repository root (the kernel family
    is the code's choice, not `MSLITE_KERNELS`')."""
    env = {k: v for k, v in os.environ.items() if k != ENV}
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            check=True)
    return json.loads(result.stdout)


_KERNEL_MODULES = "sorted(m[len('lite.kernels.'):] for m in sys.modules if m.startswith('lite.kernels.'))"


def test_import_lite_imports_no_kernel_module_and_not_numba() -> None:
    imported = _fresh(f"import json, sys, lite; print(json.dumps([{_KERNEL_MODULES}, 'numba' in sys.modules]))")
    assert [[module for module in imported[0] if module in MODULES], imported[1]] == [[], False]


def test_a_session_imports_only_the_kernel_modules_of_its_ops(tmp_path: Path) -> None:
    path = tmp_path / "small_cnn.ms"
    path.write_bytes(convert(small_cnn()))
    ops = {node.op for node in Model.Load(str(path)).nodes}
    session = _fresh("import json, sys, lite\n"
                     "s = lite.LiteSession.CreateSession(lite.Context())\n"
                     f"s.CompileGraph(lite.Model.Load({str(path)!r}))\n"
                     "s.RunGraph()\n"
                     f"print(json.dumps({_KERNEL_MODULES}))")
    needed = [module for module, module_ops in MODULES.items() if ops & set(module_ops)]
    modules_of_ops = _fresh("import json, sys, importlib\n"          # with the modules they import themselves
                            f"for module in {needed!r}: importlib.import_module('lite.kernels.' + module)\n"
                            f"print(json.dumps({_KERNEL_MODULES}))")
    assert set(needed) <= set(session) and [m for m in session if m in MODULES] == \
        [m for m in modules_of_ops if m in MODULES]


def test_modules_names_what_each_module_registers_and_declares() -> None:
    code = """
import collections, json, sys
import lite.kernel, lite.kernels, lite.traits
found, register, declare = collections.defaultdict(set), lite.kernel.register, lite.traits.declare

def recording_register(op, *type_ids, **options):
    found[sys._getframe(1).f_globals["__name__"]].add(op)
    return register(op, *type_ids, **options)

def recording_declare(*ops, **fields):
    found[sys._getframe(1).f_globals["__name__"]].update(ops)
    return declare(*ops, **fields)

lite.kernel.register, lite.traits.declare = recording_register, recording_declare
lite.kernels.load_all()
print(json.dumps({module.removeprefix("lite.kernels."): sorted(ops) for module, ops in found.items()}))
"""
    assert _fresh(code) == {module: sorted(ops) for module, ops in MODULES.items()}


@pytest.mark.parametrize("op", sorted({op for ops in MODULES.values() for op in ops}))
def test_every_op_in_the_table_has_a_kernel(op: str) -> None:
    assert kernels_of(op)


def test_an_op_without_a_kernel_is_refused_by_name_and_node() -> None:
    node = lite.model.NodeDef("model/grid", "NoSuchOp", None, [0], [1])
    with pytest.raises(NotSupportedError, match="NoSuchOp node 'model/grid' .*no kernel exists for this op"):
        create_kernel(node, lite.DataType.FLOAT32)


def test_numba_starts_without_the_packages_no_compiled_kernel_needs(tmp_path: Path) -> None:
    pytest.importorskip("numba")
    path = tmp_path / "small_cnn.ms"
    path.write_bytes(convert(small_cnn()))
    code = ("import json, sys, lite\n"
            "from lite.kernels import compiled\n"
            "s = lite.LiteSession.CreateSession(lite.Context(kernels='compiled'))\n"
            f"s.CompileGraph(lite.Model.Load({str(path)!r}))\n"
            "hidden = [name for name in compiled.UNUSED_BY_NUMBA if name in sys.modules]\n"
            "print(json.dumps([compiled.loaded() is not None, hidden]))")
    assert _fresh(code) == [True, []]
